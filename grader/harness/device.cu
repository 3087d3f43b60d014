/*
 * device.cu -- the harness's GPU side: device probe, guarded grids, NaN
 * poison, L2 flush, event timing and the copy-bandwidth probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "audit.h"
#include "harness.h"

static const unsigned char GUARD_BYTE = 0xA5;

extern "C" int harness_probe(harness_device *dev, char *why, size_t n)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        const char *detail = err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 devices";
        /* Without a driver CUDA says "driver version is insufficient", which sends people to
         * upgrade a driver they do not have: say what is missing first. */
        if (access("/proc/driver/nvidia/version", F_OK) != 0)
            snprintf(why, n, "no NVIDIA GPU or driver found on this machine (CUDA says: %s)", detail);
        else
            snprintf(why, n, "no usable CUDA GPU: %s", detail);
        return -1;
    }
    cudaDeviceProp p;
    if ((err = cudaGetDeviceProperties(&p, 0)) != cudaSuccess ||
        (err = cudaMemGetInfo(&dev->mem_free_bytes, &dev->global_mem_bytes)) != cudaSuccess) {
        snprintf(why, n, "GPU 0 is not usable: %s", cudaGetErrorString(err));
        return -1;
    }
    snprintf(dev->name, sizeof dev->name, "%s", p.name);
    dev->cc_major = p.major;
    dev->cc_minor = p.minor;
    dev->sm_count = p.multiProcessorCount;
    dev->l2_bytes = (size_t)p.l2CacheSize;
    return 0;
}

/* ------------------------------------------------------------ guarded grids */

extern "C" float *harness_grid_alloc(size_t n)
{
    unsigned char *base = NULL;
    const size_t bytes = n * sizeof(float) + 2 * (size_t)HARNESS_GUARD_BYTES;
    CUDA_CHECK(cudaMalloc((void **)&base, bytes));
    CUDA_CHECK(cudaMemset(base, GUARD_BYTE, HARNESS_GUARD_BYTES));
    CUDA_CHECK(cudaMemset(base + HARNESS_GUARD_BYTES + n * sizeof(float), GUARD_BYTE,
                          HARNESS_GUARD_BYTES));
    return (float *)(base + HARNESS_GUARD_BYTES);
}

extern "C" void harness_grid_free(float *d)
{
    if (d)
        CUDA_CHECK(cudaFree((unsigned char *)d - HARNESS_GUARD_BYTES));
}

extern "C" int harness_guards_intact(const float *d, size_t n, const char *what, harness_report *r)
{
    static unsigned char guard[2][HARNESS_GUARD_BYTES];
    const unsigned char *base = (const unsigned char *)d - HARNESS_GUARD_BYTES;
    CUDA_CHECK(cudaMemcpy(guard[0], base, HARNESS_GUARD_BYTES, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(guard[1], base + HARNESS_GUARD_BYTES + n * sizeof(float),
                          HARNESS_GUARD_BYTES, cudaMemcpyDeviceToHost));
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < HARNESS_GUARD_BYTES; i++) {
            if (guard[side][i] == GUARD_BYTE)
                continue;
            /* Element index of the first overwritten byte, relative to d[0]. */
            const long long elem = side == 0 ? -(long long)((HARNESS_GUARD_BYTES - i + 3) / 4)
                                             : (long long)n + i / 4;
            const size_t used = strlen(r->message);
            snprintf(r->message + used, sizeof r->message - used,
                     "%swrite outside %s: element %lld of a %zu-element grid was written "
                     "(%s it)", used ? " " : "", what, elem, n, side == 0 ? "before" : "past the end of");
            r->ok = 0;
            return 0;
        }
    return 1;
}

extern "C" void harness_poison(float *d, size_t n, cudaStream_t stream)
{
    CUDA_CHECK(cudaMemsetAsync(d, 0xFF, n * sizeof(float), stream)); /* 0xFFFFFFFF is a NaN */
}

static __global__ void count_nan_kernel(const float *__restrict__ d, size_t n,
                                        unsigned long long *count)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mine += isnan(d[i]) ? 1 : 0;
    if (mine)
        atomicAdd(count, mine);
}

extern "C" size_t harness_count_nan(const float *d, size_t n, cudaStream_t stream)
{
    static unsigned long long *d_count = NULL; /* allocated once, reused */
    unsigned long long count = 0;
    if (!d_count)
        CUDA_CHECK(cudaMalloc((void **)&d_count, sizeof *d_count));
    CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof *d_count, stream));
    count_nan_kernel<<<1024, 256, 0, stream>>>(d, n, d_count);
    CUDA_CHECK_LAUNCH(stream, 0);
    CUDA_CHECK(cudaMemcpyAsync(&count, d_count, sizeof count, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return (size_t)count;
}

/* ---------------------------------------------------------------- L2 flush */

extern "C" void harness_l2_flusher_init(harness_l2_flusher *f, const harness_device *dev)
{
    f->bytes = 2 * (dev->l2_bytes ? dev->l2_bytes : (size_t)64 << 20);
    CUDA_CHECK(cudaMalloc(&f->d_buf, f->bytes + sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(f->d_buf, 0, f->bytes + sizeof(unsigned)));
}

/* Reads the whole buffer; writes (one word) only if it found a non-zero
 * word, which it never does: the reads alone fill L2 with clean lines. */
static __global__ void l2_read_kernel(const uint4 *__restrict__ buf, size_t n4, unsigned *sink)
{
    unsigned any = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = buf[i];
        any |= v.x | v.y | v.z | v.w;
    }
    if (any)
        *sink = any;
}

/* Flushing by reading, not writing: a memset would leave L2 full of dirty
 * lines, written back to DRAM during the next (timed) kernel -- tens of MB
 * of traffic the student's kernel would be charged for.  Reading twice the L2
 * size evicts everything, writes back what was dirty now, outside the timed
 * window, and leaves only clean lines behind. */
extern "C" void harness_l2_flush(harness_l2_flusher *f, cudaStream_t stream)
{
    const size_t n4 = f->bytes / sizeof(uint4);
    l2_read_kernel<<<2048, 256, 0, stream>>>((const uint4 *)f->d_buf, n4,
                                             (unsigned *)((char *)f->d_buf + f->bytes));
    CUDA_CHECK_LAUNCH(stream, 0);
}

extern "C" void harness_l2_flusher_free(harness_l2_flusher *f)
{
    CUDA_CHECK(cudaFree(f->d_buf));
    f->d_buf = NULL;
}

/* ------------------------------------------------------------------ timing */

/*
 * The timed interval must hold every piece of device work the launcher starts,
 * on whatever stream: a kernel on another stream would otherwise run outside
 * it (while something short on the timed stream stands in for it).  A
 * launcher can reach three streams: the one it is given (t->stream), the
 * legacy default stream (stream 0 or cudaStreamLegacy), and this thread's
 * per-thread default stream (cudaStreamPerThread, or stream 0 in a file that
 * defines CUDA_API_PER_THREAD_DEFAULT_STREAM or is compiled with
 * --default-stream per-thread).  It cannot create streams, events or graphs,
 * nor start threads: the symbol check forbids them (symbols.py).
 *   - t->stream is a blocking stream (cudaStreamCreate), so the legacy default
 *     stream waits for it and it for the legacy stream: work there is ordered
 *     after `start` and before `stop` without anything more;
 *   - the per-thread stream synchronises with the legacy stream only, so the
 *     timer ties it in by hand: it waits for `start` before the launcher runs,
 *     and t->stream waits for everything it holds before `stop`.
 * Kernels launched from the device belong to the grid that launched them (a
 * grid completes after its children), and the build does not allow them
 * anyway (no relocatable device code).
 */
extern "C" void harness_timer_init(harness_timer *t, cudaStream_t stream)
{
    t->stream = stream;
    CUDA_CHECK(cudaEventCreate(&t->start));
    CUDA_CHECK(cudaEventCreate(&t->stop));
    CUDA_CHECK(cudaEventCreateWithFlags(&t->join, cudaEventDisableTiming));
}

extern "C" void harness_timer_start(harness_timer *t)
{
    CUDA_CHECK(cudaEventRecord(t->start, t->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cudaStreamPerThread, t->start, 0));
}

extern "C" double harness_timer_stop_ms(harness_timer *t)
{
    float ms = 0.0f;
    CUDA_CHECK(cudaEventRecord(t->join, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamWaitEvent(t->stream, t->join, 0));
    CUDA_CHECK(cudaEventRecord(t->stop, t->stream));
    CUDA_CHECK(cudaEventSynchronize(t->stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, t->start, t->stop));
    return ms;
}

extern "C" void harness_timer_free(harness_timer *t)
{
    CUDA_CHECK(cudaEventDestroy(t->start));
    CUDA_CHECK(cudaEventDestroy(t->stop));
    CUDA_CHECK(cudaEventDestroy(t->join));
}

/* ---------------------------------------------------------- the audit marker */

/* Launched by audit_begin on the stream given to the launcher: the first record
 * of an audit window, whose stream id is that stream's (audit.c). */
static __global__ void harness_audit_marker_kernel(void) {}

extern "C" void harness_audit_marker(cudaStream_t stream)
{
    harness_audit_marker_kernel<<<1, 1, 0, stream>>>();
    CUDA_CHECK_LAUNCH(stream, 0);
}

/* -------------------------------------------------------------- copy probe */

/* One float4 per thread, plus the scalar tail: the simplest copy that keeps
 * enough 16-byte loads in flight to saturate DRAM. */
static __global__ void copy_float4_kernel(const float4 *__restrict__ src, float4 *__restrict__ dst,
                                          size_t n4, const float *__restrict__ src_tail,
                                          float *__restrict__ dst_tail, int tail)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n4)
        dst[i] = src[i];
    if (i < (size_t)tail)
        dst_tail[i] = src_tail[i];
}

extern "C" void harness_copy_bandwidth(const float *d_src, float *d_dst, size_t n, int reps,
                                       cudaStream_t stream, double *memcpy_gbps, double *kernel_gbps)
{
    const double bytes = 2.0 * (double)n * sizeof(float); /* read + write */
    const size_t n4 = n / 4;
    const int tail = (int)(n % 4), threads = 256;
    const size_t blocks = (n4 + threads - 1) / threads + 1;
    double *ms = (double *)malloc(sizeof(double) * (size_t)reps);
    harness_timer t;
    harness_timer_init(&t, stream);
    for (int way = 0; way < 2; way++) {
        for (int r = -1; r < reps; r++) { /* r == -1: warm-up, not recorded */
            harness_timer_start(&t);
            if (way == 0) {
                CUDA_CHECK(cudaMemcpyAsync(d_dst, d_src, n * sizeof(float),
                                           cudaMemcpyDeviceToDevice, stream));
            } else {
                copy_float4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
                    (const float4 *)d_src, (float4 *)d_dst, n4, d_src + 4 * n4, d_dst + 4 * n4, tail);
                CUDA_CHECK_LAUNCH(stream, 0);
            }
            const double m = harness_timer_stop_ms(&t);
            if (r >= 0)
                ms[r] = m;
        }
        *(way == 0 ? memcpy_gbps : kernel_gbps) = harness_gbps(bytes, harness_median(ms, reps));
    }
    harness_timer_free(&t);
    free(ms);
}

/* ------------------------------------------------ trusted GPU kernels (bench) */

/* SplitMix64, as random.c: the same integers on both sides. */
static __device__ __forceinline__ uint64_t splitmix64_dev(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static __global__ void fill_random_kernel(float *__restrict__ d, size_t n, uint64_t key)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        /* 24 random bits: 2u - 1 is exactly representable, so double -> float is exact */
        const double u = (double)(splitmix64_dev(key + (uint64_t)i) >> 40) * (1.0 / 16777216.0);
        d[i] = (float)(2.0 * u - 1.0);
    }
}

extern "C" void harness_fill_random_device(float *d, size_t n, uint64_t seed, cudaStream_t stream)
{
    /* key = splitmix64(seed), computed on the host exactly as random.c does */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    const uint64_t key = z ^ (z >> 31);
    fill_random_kernel<<<2048, 256, 0, stream>>>(d, n, key);
    CUDA_CHECK_LAUNCH(stream, 0);
}

/*
 * The reference sweeps.  __fmul_rn and __fadd_rn forbid the compiler to fuse a
 * multiply and an add into one FMA, so each cell is evaluated exactly as
 * cpu_reference.c does it (float, left to right, c0 term first): the GPU
 * reference and the CPU reference give the same bits.
 */
#define MUL __fmul_rn
#define ADD __fadd_rn

/*
 * Every reference kernel walks the grid by rows: blockIdx.y (striding by gridDim.y) picks a
 * row, the threads of blockIdx.x walk its cells, so no thread divides a 64-bit index per cell
 * (those divisions, not memory, made the references the slowest part of a bench call).
 * ref_grid() is their launch shape.
 */
static dim3 ref_grid(int nx, long long rows)
{
    const int threads = 256;
    const long long bx = ((long long)nx + threads - 1) / threads;
    return dim3((unsigned)(bx < 64 ? bx : 64), (unsigned)(rows < 8192 ? rows : 8192));
}

static __global__ void ref_sweep2d_kernel(const float *__restrict__ in, float *__restrict__ out, int nx,
                                          int ny, stencil2d_coeffs c, int periodic)
{
    for (long long y = blockIdx.y; y < ny; y += gridDim.y) {
        const size_t row = (size_t)y * nx;
        const int ym = y == 0 ? (periodic ? ny - 1 : -1) : (int)y - 1;
        const int yp = y == ny - 1 ? (periodic ? 0 : -1) : (int)y + 1;
        for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x) {
            const size_t i = row + x;
            int xm = x - 1, xp = x + 1;
            if (periodic) {
                xm = x == 0 ? nx - 1 : xm;
                xp = x == nx - 1 ? 0 : xp;
            } else if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[i] = in[i];
                continue;
            }
            float v = MUL(c.c0, in[i]);
            v = ADD(v, MUL(c.xm, in[row + xm]));
            v = ADD(v, MUL(c.xp, in[row + xp]));
            v = ADD(v, MUL(c.ym, in[(size_t)ym * nx + x]));
            v = ADD(v, MUL(c.yp, in[(size_t)yp * nx + x]));
            out[i] = v;
        }
    }
}

static __global__ void ref_sweep3d_kernel(const float *__restrict__ in, float *__restrict__ out, int nx,
                                          int ny, int nz, stencil3d_coeffs c)
{
    const size_t plane = (size_t)nx * ny;
    for (long long r = blockIdx.y; r < (long long)ny * nz; r += gridDim.y) {
        const int y = (int)(r % ny), z = (int)(r / ny);       /* once per row, not per cell */
        const size_t row = (size_t)r * nx;
        const int edge = y == 0 || z == 0 || y == ny - 1 || z == nz - 1;
        for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x) {
            const size_t i = row + x;
            if (edge || x == 0 || x == nx - 1) {
                out[i] = in[i];
                continue;
            }
            float v = MUL(c.c0, in[i]);
            v = ADD(v, MUL(c.xm, in[i - 1]));
            v = ADD(v, MUL(c.xp, in[i + 1]));
            v = ADD(v, MUL(c.ym, in[i - nx]));
            v = ADD(v, MUL(c.yp, in[i + nx]));
            v = ADD(v, MUL(c.zm, in[i - plane]));
            v = ADD(v, MUL(c.zp, in[i + plane]));
            out[i] = v;
        }
    }
}

/* r = f - (u[x-1] + u[x+1] + u[y-1] + u[y+1] - 4u) / h^2, in double; sum(r^2). */
static __global__ void ref_residual_kernel(const float *__restrict__ u, const float *__restrict__ f,
                                           int nx, int ny, double h, double *result)
{
    double mine = 0.0;
    for (long long y = 1 + blockIdx.y; y < ny - 1; y += gridDim.y) {
        const size_t row = (size_t)y * nx;
        for (int x = 1 + blockIdx.x * blockDim.x + threadIdx.x; x < nx - 1; x += gridDim.x * blockDim.x) {
            const size_t i = row + x;
            const double lap = ((double)u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] - 4.0 * u[i]) / (h * h);
            const double r = f[i] - lap;
            mine += r * r;
        }
    }
    for (int off = 16; off > 0; off /= 2)
        mine += __shfl_down_sync(0xffffffffu, mine, off);
    if ((threadIdx.x & 31) == 0 && mine != 0.0)
        atomicAdd(result, mine);
}

/* unew = (u[x-1] + u[x+1] + u[y-1] + u[y+1] - h^2 f) / 4 in float, in the order written. */
static __global__ void ref_jacobi_kernel(const float *__restrict__ u, float *__restrict__ unew,
                                         const float *__restrict__ f, int nx, int ny, float h)
{
    for (long long y = blockIdx.y; y < ny; y += gridDim.y) {
        const size_t row = (size_t)y * nx;
        for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x) {
            const size_t i = row + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                unew[i] = u[i];
                continue;
            }
            float s = ADD(ADD(ADD(u[i - 1], u[i + 1]), u[i - nx]), u[i + nx]);
            s = __fsub_rn(s, MUL(MUL(h, h), f[i]));
            unew[i] = MUL(s, 0.25f);
        }
    }
}

#undef MUL
#undef ADD

extern "C" void harness_gpu_residual_norm2(const float *d_u, const float *d_f, int nx, int ny, float h,
                                           double *d_result, cudaStream_t stream)
{
    CUDA_CHECK(cudaMemsetAsync(d_result, 0, sizeof(double), stream));
    ref_residual_kernel<<<ref_grid(nx, ny), 256, 0, stream>>>(d_u, d_f, nx, ny, (double)h, d_result);
    CUDA_CHECK_LAUNCH(stream, 0);
}

extern "C" void harness_gpu_jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx,
                                         int ny, float h, cudaStream_t stream)
{
    ref_jacobi_kernel<<<ref_grid(nx, ny), 256, 0, stream>>>(d_u, d_unew, d_f, nx, ny, h);
    CUDA_CHECK_LAUNCH(stream, 0);
}

extern "C" void harness_gpu_stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                            stencil2d_coeffs c, cudaStream_t stream)
{
    ref_sweep2d_kernel<<<ref_grid(nx, ny), 256, 0, stream>>>(d_in, d_out, nx, ny, c, 0);
    CUDA_CHECK_LAUNCH(stream, 0);
}

extern "C" void harness_gpu_stencil2d_periodic_sweep(const float *d_in, float *d_out, int nx, int ny,
                                                     stencil2d_coeffs c, cudaStream_t stream)
{
    ref_sweep2d_kernel<<<ref_grid(nx, ny), 256, 0, stream>>>(d_in, d_out, nx, ny, c, 1);
    CUDA_CHECK_LAUNCH(stream, 0);
}

extern "C" void harness_gpu_stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                            stencil3d_coeffs c, cudaStream_t stream)
{
    ref_sweep3d_kernel<<<ref_grid(nx, (long long)ny * nz), 256, 0, stream>>>(d_in, d_out, nx, ny, nz, c);
    CUDA_CHECK_LAUNCH(stream, 0);
}

static __global__ void count_mismatch_kernel(const float *__restrict__ got, const float *__restrict__ want,
                                             size_t n, double rtol, double atol,
                                             unsigned long long *count)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const double g = got[i], w = want[i];
        /* written so that a NaN in got (or want) counts as a mismatch */
        mine += !(fabs(g - w) <= atol + rtol * fabs(w));
    }
    if (mine)
        atomicAdd(count, mine);
}

extern "C" size_t harness_count_mismatches(const float *d_got, const float *d_want, size_t n,
                                           harness_tolerance tol, cudaStream_t stream)
{
    static unsigned long long *d_count = NULL; /* allocated once, reused */
    unsigned long long count = 0;
    if (!d_count)
        CUDA_CHECK(cudaMalloc((void **)&d_count, sizeof *d_count));
    CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof *d_count, stream));
    count_mismatch_kernel<<<2048, 256, 0, stream>>>(d_got, d_want, n, tol.rtol, tol.atol, d_count);
    CUDA_CHECK_LAUNCH(stream, 0);
    CUDA_CHECK(cudaMemcpyAsync(&count, d_count, sizeof count, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return (size_t)count;
}

/* splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): every bit of x moves about half the bits of the result. */
static __device__ unsigned long long mix64(unsigned long long x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Sum over the words of mix(word, index): integer additions, so the order in which threads
 * add up changes nothing, and the digest is the same on every run for the same bits. */
static __global__ void digest_kernel(const uint32_t *__restrict__ words, size_t n, unsigned long long *sum)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mine += mix64(((unsigned long long)i << 32) ^ words[i] ^ 0x9e3779b97f4a7c15ull);
    atomicAdd(sum, mine);
}

extern "C" uint64_t harness_digest(const void *d_data, size_t bytes, cudaStream_t stream)
{
    static unsigned long long *d_sum = NULL; /* allocated once, reused */
    unsigned long long sum = 0;
    if (bytes % 4 != 0)
        harness_fail("kit error: harness_digest needs whole 32-bit words, got %zu bytes", bytes);
    if (!d_sum)
        CUDA_CHECK(cudaMalloc((void **)&d_sum, sizeof *d_sum));
    CUDA_CHECK(cudaMemsetAsync(d_sum, 0, sizeof *d_sum, stream));
    digest_kernel<<<2048, 256, 0, stream>>>((const uint32_t *)d_data, bytes / 4, d_sum);
    CUDA_CHECK_LAUNCH(stream, 0);
    CUDA_CHECK(cudaMemcpyAsync(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return (uint64_t)sum;
}
