/*
 * smem_roof.cu -- the shared-memory roof of this GPU: the bytes per clock that one SM's shared memory
 * delivers to loads, for 4-byte and for 16-byte accesses, without bank conflicts.
 *
 * Lab 8 fuses several sweeps into one pass over DRAM, so its bound moves on chip: each cell update
 * reads its neighbours from shared memory, and the SM serves at most so many bytes of it per clock.
 * The hardware's figure is 32 banks x 4 bytes = 128 bytes per clock per SM (CUDA C++ Programming
 * Guide, "Shared Memory", compute capability 5.x and later); this program measures what loads reach.
 *
 * How: one wave of blocks (as many per SM as fit), each thread reading its block's tile over and over,
 * consecutive threads at consecutive elements (no two threads of a warp in one bank, beyond what one
 * access width forces), eight independent loads in flight per thread.  Each block records its SM
 * (%smid) and the SM's clock (clock64) when it starts and ends; an SM's rate is the bytes its blocks
 * loaded over the clocks from its first start to its last end, so the figure is per clock, whatever
 * clock the GPU ran at.  The program prints the median over the SMs and the smallest, and, from
 * %globaltimer, the SM clock the run saw.
 *
 * Usage: smem_roof [--json FILE]   (one JSON object; FILE "-" or none: stdout only)
 * Exit status 0; 2 with a message on stderr when there is no GPU or a CUDA call fails.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "smem_roof: %s: %s\n", #call, cudaGetErrorString(err_));       \
            std::exit(2);                                                                        \
        }                                                                                        \
    } while (0)

constexpr int BLOCK = 256;          // threads per block
constexpr int LOADS = 8;            // independent loads per thread per round
constexpr int WINDOW = 1024;        // elements the rounds' starting points cycle through
constexpr int TILE = WINDOW + LOADS * BLOCK;     // elements of the tile: every load stays inside

struct Stamp {
    unsigned smid;
    long long start, end;           // the SM's clock64
    unsigned long long ns0, ns1;    // %globaltimer, nanoseconds
};

__device__ __forceinline__ unsigned smid()
{
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void mix(unsigned &acc, unsigned v) { acc ^= v; }
__device__ __forceinline__ void mix(uint4 &acc, uint4 v)
{
    acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
}
__device__ __forceinline__ bool nonzero(unsigned v) { return v != 0; }
__device__ __forceinline__ bool nonzero(uint4 v) { return (v.x | v.y | v.z | v.w) != 0; }
__device__ __forceinline__ void fill(unsigned &e, unsigned i) { e = i * 2654435761u; }
__device__ __forceinline__ void fill(uint4 &e, unsigned i)
{
    e = make_uint4(i * 2654435761u, i + 1, i ^ 0x9e3779b9u, ~i);
}

/* Each thread: `rounds` rounds of LOADS loads of T from the tile, at offsets k * BLOCK from a start that
 * moves by one warp's width per round (so no load repeats the one before it and none can be hoisted).
 * The XOR of what was read goes to sink only if it is zero, which it never is in practice: the compiler
 * must make every load, and the stores cost nothing. */
template <typename T>
__global__ void __launch_bounds__(BLOCK) read_shared(int rounds, Stamp *stamps, T *sink)
{
    extern __shared__ __align__(16) unsigned char raw[];
    T *tile = reinterpret_cast<T *>(raw);
    for (int i = threadIdx.x; i < TILE; i += BLOCK)
        fill(tile[i], i);
    __syncthreads();
    long long start = clock64();
    unsigned long long ns0 = global_ns();
    T acc = tile[threadIdx.x];
    for (int r = 0; r < rounds; ++r) {
        const T *p = tile + ((threadIdx.x + r * 32) & (WINDOW - 1));
#pragma unroll
        for (int k = 0; k < LOADS; ++k)
            mix(acc, p[k * BLOCK]);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        stamps[blockIdx.x] = Stamp{smid(), start, clock64(), ns0, global_ns()};
    if (!nonzero(acc))
        sink[blockIdx.x * BLOCK + threadIdx.x] = acc;
}

struct Result {
    int bytes;                      // bytes per access
    int blocks_per_sm;
    double median, lowest;          // bytes per clock per SM
    double clock_mhz;               // the SM clock the run saw
    double ms;
};

template <typename T>
static Result measure(const cudaDeviceProp &prop)
{
    const size_t smem = TILE * sizeof(T);
    CHECK(cudaFuncSetAttribute(read_shared<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_shared<T>, BLOCK, smem));
    const int blocks = per_sm * prop.multiProcessorCount;         // one wave
    Stamp *stamps;
    T *sink;
    CHECK(cudaMalloc(&stamps, blocks * sizeof(Stamp)));
    CHECK(cudaMalloc(&sink, (size_t)blocks * BLOCK * sizeof(T)));
    // About 2^28 bytes per block: long beside a launch, short beside the program's start.
    const int rounds = (int)((1u << 28) / ((unsigned)BLOCK * LOADS * sizeof(T)));
    read_shared<T><<<blocks, BLOCK, smem>>>(8, stamps, sink);       // warm-up
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    read_shared<T><<<blocks, BLOCK, smem>>>(rounds, stamps, sink);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaGetLastError());
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<Stamp> s(blocks);
    CHECK(cudaMemcpy(s.data(), stamps, blocks * sizeof(Stamp), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(stamps));
    CHECK(cudaFree(sink));

    const double per_block = (double)rounds * LOADS * BLOCK * sizeof(T);
    std::vector<double> rates, clocks;
    for (int sm = 0; sm < prop.multiProcessorCount; ++sm) {
        long long first = 0, last = 0;
        int n = 0;
        for (const Stamp &b : s)
            if ((int)b.smid == sm) {
                first = n ? std::min(first, b.start) : b.start;
                last = n ? std::max(last, b.end) : b.end;
                ++n;
            }
        if (n && last > first)
            rates.push_back(n * per_block / (double)(last - first));
    }
    for (const Stamp &b : s)
        if (b.ns1 > b.ns0)
            clocks.push_back((double)(b.end - b.start) / (double)(b.ns1 - b.ns0) * 1e3);
    if (rates.empty() || clocks.empty()) {
        std::fprintf(stderr, "smem_roof: no block recorded its SM's clock\n");
        std::exit(2);
    }
    std::sort(rates.begin(), rates.end());
    std::sort(clocks.begin(), clocks.end());
    return Result{(int)sizeof(T), per_sm, rates[rates.size() / 2], rates.front(), clocks[clocks.size() / 2], ms};
}

int main(int argc, char **argv)
{
    const char *json = (argc == 3 && !std::strcmp(argv[1], "--json")) ? argv[2] : nullptr;
    if (argc != 1 && !json) {
        std::fprintf(stderr, "usage: smem_roof [--json FILE]\n");
        return 2;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        std::fprintf(stderr, "smem_roof: no CUDA GPU is visible (cudaGetDeviceCount)\n");
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const Result r[2] = {measure<unsigned>(prop), measure<uint4>(prop)};
    char text[2048];
    int n = std::snprintf(text, sizeof text,
                          "{\"device\": \"%s\", \"cc\": \"%d.%d\", \"sm_count\": %d, \"block\": %d, "
                          "\"loads_per_round\": %d, \"accesses\": [",
                          prop.name, prop.major, prop.minor, prop.multiProcessorCount, BLOCK, LOADS);
    for (int i = 0; i < 2; ++i)
        n += std::snprintf(text + n, sizeof text - n,
                           "%s{\"bytes\": %d, \"blocks_per_sm\": %d, \"bytes_per_clock_per_sm\": %.2f, "
                           "\"lowest_sm\": %.2f, \"clock_mhz\": %.0f, \"ms\": %.3f}",
                           i ? ", " : "", r[i].bytes, r[i].blocks_per_sm, r[i].median, r[i].lowest,
                           r[i].clock_mhz, r[i].ms);
    std::snprintf(text + n, sizeof text - n, "]}\n");
    std::fputs(text, stdout);
    if (json && std::strcmp(json, "-")) {
        FILE *f = std::fopen(json, "w");
        if (!f || std::fputs(text, f) < 0 || std::fclose(f)) {
            std::fprintf(stderr, "smem_roof: cannot write %s\n", json);
            return 2;
        }
    }
    return 0;
}
