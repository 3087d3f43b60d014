/*
 * Lab 8 reference: temporal blocking in registers.  `steps` Dirichlet sweeps
 * in passes of up to K sweeps each: one pass reads the grid from DRAM once,
 * applies its sweeps on the chip, and writes the grid once.
 *
 * What changed since the previous design, and why
 * -----------------------------------------------
 * The first reference of this lab (2026-11-23) was lab 4's march chained K = 8
 * times: a block of 128 threads owned a strip of 512 columns, every thread a
 * float4 of each row, and the K stages of the pipeline exchanged the two end
 * cells of each thread's float4 through shared memory, behind one
 * __syncthreads() per row.  It reached the same effective bandwidth on an
 * H100 and on an H200, although the H200 has 1.4 x the memory bandwidth, so
 * DRAM was no longer its limit; the work on the chip was.  Its loop issued
 * 614 instructions per row and thread (nvdisasm of its sm_90 build, CUDA
 * 13.0), 19.2 per cell update, for the 9 floating-point ones of the update:
 * 133 register moves, 105 branch and reconvergence instructions (BRA, BSSY,
 * BSYNC), 32 shared-memory accesses, and its share of the barrier.
 *
 * This design keeps the pipeline (the time steps stay in registers: AN5D's
 * register streaming, CGO 2020) and removes everything else it could:
 *
 *   1. A warp is the unit of the strip.  Each warp owns its own strip of
 *      STRIP = 32 * VEC columns with its own halo, so its 32 threads never
 *      wait for another warp: no __syncthreads() at all.  The x neighbours
 *      at a thread's two ends come from the neighbouring lanes by register
 *      shuffles (__shfl_up_sync, __shfl_down_sync): 2 per thread per stage,
 *      2 / VEC per cell and sweep, instead of 1 shared-memory access.  The
 *      price is a narrower strip: more redundant halo columns (below).
 *   2. No boundary tests in the hot loop.  A warp whose strip and rows lie
 *      strictly inside the grid (nearly all of them) runs a copy of the march
 *      compiled without the Dirichlet selects and predicates (`EDGE = false`);
 *      only warps that touch the grid's edge pay for them.
 *   3. Few register moves.  Each stage keeps two rows, and the row loop is
 *      unrolled twice with the two rows swapping roles (north and mid), so
 *      the new mid row is written where the dead north row was instead of
 *      being copied (31 moves per two rows, below, against 133 per row).
 *   4. The input rows arrive through shared memory by asynchronous copies
 *      (cp.async, sm_80 and later; __pipeline_memcpy_async), AHEAD rows ahead
 *      of their use, into a small ring per thread: loads in flight that hold
 *      no registers while they wait, which the register-hungry pipeline needs
 *      (EBISU, ICS 2023, argues the same for low-occupancy deep temporal
 *      blocking).  Each thread reads back only the bytes it copied itself, so
 *      no barrier is needed there either.
 *   5. Every parameter is compile-time and tunable (`make tune`): K, VEC, the
 *      segment length SEG, warps per block, the register cap (OCC) and AHEAD,
 *      defaults below (the best measured on an H100); the kit
 *      builds the reference with the best values measured on your GPU
 *      (labs/08-temporal-blocking/tuning/<gpu>.json) when it has them.
 *
 * The pipeline (unchanged in principle)
 * -------------------------------------
 * A warp walks down its strip one row per iteration.  Iteration i takes row
 * y0 = (first row) - K + i at time 0 from the ring, and then
 *     stage 0 computes row y0-1 at time 1 from rows y0-2, y0-1, y0 at time 0,
 *     stage 1 computes row y0-2 at time 2 from rows y0-3, y0-2, y0-1 at time 1,
 *     ...
 *     stage K-1 computes row y0-K at time K, which is stored.
 * Stage j keeps its north and mid rows (time j) in registers; its south row
 * is what stage j-1 produced in this very iteration, in the same thread's
 * registers, since a thread owns the same columns at every time.
 *
 * Redundant work: sweep j+1 of a cell needs its neighbours at time j, so a
 * pass of K sweeps needs its input K cells beyond its output on every side.
 * A strip has H = roundup(K, VEC) halo columns on each side (whole VEC-cell
 * groups, so that loads stay aligned) and stores STRIP - 2H; a segment of SEG
 * rows computes SEG + 2K.  With the defaults (VEC = 4, K = 8, SEG = 128):
 * 128 / 112 = 1.143 column updates and 144 / 128 = 1.125 row updates per
 * useful one, 1.29 in all (the first design: 1.10, on wider strips).
 *
 * Why K stops at 8 here: the bench's 16 steps are even, so the result must
 * come back in d_a, which takes an even number of passes: two of 8.  K = 16
 * would still run two passes of 8, on a pipeline half idle.
 *
 * Bitwise equal to separate sweeps
 * --------------------------------
 * Every cell of every stage is computed by stencil_point from the same five
 * time-j values as sweep j+1 of lab 4 would use, in the order of the CPU
 * reference (grader/harness/cpu_reference.c):
 *     ((((c0*c + xm*w) + xp*e) + ym*n) + yp*s)
 * with each product and each sum rounded on its own (__fmul_rn, __fadd_rn):
 * nvcc would otherwise contract `a*b + c` into one fused multiply-add with a
 * single rounding, and lab 8's tolerance is zero (lab.json).  Boundary cells
 * keep their value at every time, bit for bit.
 *
 * What each step was worth on an H100 and an H200 is in the handout
 * ("Where it stops paying", "Development notes"): make tune's records of
 * every parameter (labs/08-temporal-blocking/tuning/), the full grading runs,
 * and the development notes of the rewrite (handouts/data/h100/notes.json).
 * In short: the interior loop, twice the resident warps at VEC = 4, and
 * K = 8 each pay; OCC and AHEAD move the result by less than two runs of one
 * build differ.  The interior loop issues 732 instructions per two rows of a
 * thread (64 cell updates): 576 FMUL and FADD, 32 SHFL, 31 MOV, 8 LDS and
 * loop and address arithmetic, 11.4 per update against the first design's
 * 19.2 (nvdisasm, same build); the EDGE loop 1109.  The effective bandwidth
 * is the same on both GPUs, so the chip's issue rate, not DRAM, is again the
 * limit, at a higher level than the first design's.
 *
 * Passes and the returned buffer
 * ------------------------------
 * stencil2d_run splits `steps` into P passes of at most K sweeps, as even as
 * possible (P = ceil(steps / K), plus one when that makes P and `steps`
 * differ in parity, so that the result is in d_a after an even number of
 * steps and in d_b after an odd number, as stencil_lab.h states; the bench's
 * 16 steps take 2 passes of 8 when K = 8).  A pass of exactly K sweeps runs
 * the kernel compiled for K (`FULL`); a shorter pass of k sweeps runs the
 * same pipeline with stages k .. K-1 passing their row through unchanged
 * (a uniform branch per stage), which keeps one kernel for every k.  Each
 * pass is one launch on `stream`; kernels on one stream run in order.
 *
 * Preconditions
 * -------------
 *   Aligned path: nx % 4 == 0 and both buffers 16-byte aligned, so that every
 *   copy of CH = min(VEC, 4) cells is aligned (strip origins and halos are
 *   multiples of VEC columns).  Other widths: the same kernel with 4-byte
 *   copies, one per cell, always on the EDGE path (correct, not fast).
 *   blockDim = (THREADS, 1), THREADS = 32 * WARPS; a 1D grid of
 *   ceil(strips / WARPS) x segments blocks (no gridDim.y limit).
 *   Static shared memory: the rings, RING * VEC * 4 bytes per thread (RING =
 *   AHEAD + 1 rounded up to a power of two); no barrier, no dynamic memory.
 *   Registers: 2 rows of VEC floats per stage, at most 2048 / OCC per thread
 *   (__launch_bounds__); 128 for the defaults, no spills (the build's
 *   ptxas.log has the figures of each of the four kernels).
 *   Any nx, ny >= 1; steps >= 0 (steps <= 0 returns d_a untouched).
 *
 * Per-thread contract
 * -------------------
 *   Block b holds WARPS warps of segment sy = b / blocks_x; warp w of it owns
 *   strip sx = (b % blocks_x) * WARPS + w, and returns at once when sx is past
 *   the last strip (the whole warp: nothing below waits for other warps).
 *   Lane l owns columns x .. x+VEC-1, x = sx * STORED - H + VEC * l, of rows
 *   sy*SEG - K .. min(sy*SEG + SEG, ny) + K - 1, and stores its cells of rows
 *   sy*SEG .. min(sy*SEG + SEG, ny) - 1 when its columns are among the strip's
 *   STORED ones and inside the grid.  Every lane of a warp runs the same
 *   number of iterations (it depends on the warp only), so each shuffle has
 *   all 32 lanes.
 *
 * Why every edge read is safe
 * ---------------------------
 *   Global reads: each copy of CH cells is issued only when its row is in
 *   0 .. ny-1 and its columns in 0 .. nx-1 (aligned path: nx % 4 == 0 and the
 *   copy is CH-aligned, so it is wholly inside or wholly outside); otherwise
 *   the thread writes zeros into its ring slot instead.
 *   Shared reads: a thread reads a ring slot only after cp.async.wait_group
 *   has completed the copy it issued into it, and rewrites that slot RING
 *   rows later, after the values it read have been used (RING >= AHEAD + 1).
 *   Shuffles: lane 0's west neighbour and lane 31's east neighbour are outside
 *   the strip; the shuffle hands them their own cells instead.  Such a wrong
 *   value, like the zeros of the first rows of the pipeline, spoils one more
 *   column (or row) per sweep, so after K sweeps the outermost K <= H columns
 *   of the strip and the K rows around the segment are wrong, and none of
 *   them is stored: a stored cell after K sweeps depends only on cells within
 *   K of it.
 *   The interior march (EDGE = false) runs only for a warp whose columns
 *   x0 .. x0+STRIP-1 lie in 1 .. nx-2 and whose rows sy*SEG-K .. y_end+K-1
 *   lie in 1 .. ny-2: every cell a stored cell depends on is then an interior
 *   cell, which both marches update the same way.
 *   The EDGE march puts back the old value of every boundary cell (rows 0
 *   and ny-1, columns 0 and nx-1) after each update.  Cells outside the grid
 *   (loaded as zeros) are updated like any other and hold meaningless values:
 *   harmless, since their only neighbours inside the grid are boundary cells,
 *   whose updates are thrown away.
 */
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* ---- tunable parameters (make tune; labs/08-temporal-blocking/tune.json) --------- */
#ifndef TUNE_K
#define TUNE_K 8          /* sweeps per pass at most */
#endif
#ifndef TUNE_VEC
#define TUNE_VEC 4        /* consecutive cells per thread and row: 2, 4 or 8 */
#endif
#ifndef TUNE_SEG
#define TUNE_SEG 128      /* rows a warp stores (its segment) */
#endif
#ifndef TUNE_WARPS
#define TUNE_WARPS 2      /* warps (independent strips) per block */
#endif
#ifndef TUNE_OCC
#define TUNE_OCC 16       /* resident warps per SM asked of ptxas: caps registers at 2048 / OCC */
#endif
#ifndef TUNE_AHEAD
#define TUNE_AHEAD 3      /* rows in flight ahead of the one being used */
#endif

constexpr int K_MAX = TUNE_K;
constexpr int VEC = TUNE_VEC;
constexpr int SEG = TUNE_SEG;
constexpr int WARPS = TUNE_WARPS;
constexpr int AHEAD = TUNE_AHEAD;
constexpr int OCC = TUNE_OCC;

constexpr int WARP = 32;
constexpr int THREADS = WARPS * WARP;                   /* blockDim.x */
constexpr int STRIP = WARP * VEC;                       /* columns a warp computes */
constexpr int HALO = (K_MAX + VEC - 1) / VEC * VEC;     /* H: >= K, whole VEC groups */
constexpr int STORED = STRIP - 2 * HALO;                /* columns a warp stores */
/* Blocks per SM for __launch_bounds__: ptxas then keeps each thread within 65536 / (32 * OCC)
 * registers (the register file of an SM, compute capability 7.5 to 9.0), spilling if it must. */
constexpr int MIN_BLOCKS = OCC / WARPS > 0 ? OCC / WARPS : 1;

/* Slots of a thread's ring: at least AHEAD + 1, a power of two (slot = row & (RING-1)). */
constexpr int ring_slots(int n) { return n <= 1 ? 1 : 2 * ring_slots((n + 1) / 2); }
constexpr int RING = ring_slots(AHEAD + 1);

static_assert(K_MAX >= 1 && K_MAX <= 16, "a pass fuses 1 to 16 sweeps (lab.json: max_fused_sweeps)");
static_assert(VEC == 2 || VEC == 4 || VEC == 8, "a thread owns 2, 4 or 8 cells of a row");
static_assert(STORED > 0, "the strip is narrower than its two halos: raise VEC or lower K");
static_assert(SEG >= 1 && WARPS >= 1 && WARPS <= 32, "at least one row and one warp, at most 1024 threads");
static_assert(OCC >= 1 && OCC <= 64, "an SM holds at most 64 resident warps");
static_assert(AHEAD >= 1 && AHEAD <= 7, "cp.async.wait_group takes 0 to 7 here");

/* The 5-point update of one cell, rounded exactly as the CPU reference rounds
 * it: each product, then each sum, left to right, no fused multiply-add. */
__device__ __forceinline__ float stencil_point(const stencil2d_coeffs &c, float centre, float xm,
                                               float xp, float ym, float yp)
{
    float s = __fmul_rn(c.c0, centre);
    s = __fadd_rn(s, __fmul_rn(c.xm, xm));
    s = __fadd_rn(s, __fmul_rn(c.xp, xp));
    s = __fadd_rn(s, __fmul_rn(c.ym, ym));
    return __fadd_rn(s, __fmul_rn(c.yp, yp));
}

/* The VEC consecutive cells of one row that a thread owns. */
struct Cells {
    float v[VEC];
};

/* Cells per copy: CH-aligned chunks on the aligned path, single cells otherwise. */
template <bool ALIGNED>
struct Chunk {
    static constexpr int CH = ALIGNED ? (VEC < 4 ? VEC : 4) : 1;
    static constexpr int N = VEC / CH;                  /* copies per row and thread */
};

/* A thread's ring: slot s, chunk c of thread t at ring[s][c][t * CH .. t * CH + CH-1],
 * so that consecutive threads touch consecutive CH * 4 bytes (no bank conflicts). */
template <bool ALIGNED>
struct Ring {
    static constexpr int CH = Chunk<ALIGNED>::CH, N = Chunk<ALIGNED>::N;
    float *base;                                        /* &ring[0][0][t * CH] */

    __device__ float *at(int slot, int c) const { return base + (slot * N + c) * (THREADS * CH); }

    /* Start copying row y of this thread's columns (from x) into `slot`: zeros for what is
     * outside the grid.  col_ok[c]: chunk c's columns are inside the grid. */
    __device__ void fetch(int slot, const float *__restrict__ in, int nx, int ny, int x, int y,
                          const bool (&col_ok)[N]) const
    {
        const bool row_ok = y >= 0 && y < ny;
#pragma unroll
        for (int c = 0; c < N; c++) {
            float *dst = at(slot, c);
            if (row_ok && col_ok[c]) {
                __pipeline_memcpy_async(dst, in + (size_t)y * nx + x + c * CH, CH * sizeof(float));
            } else {
#pragma unroll
                for (int k = 0; k < CH; k++)
                    dst[k] = 0.0f;                      /* ordered before this thread's own read */
            }
        }
        __pipeline_commit();                            /* one group per row, even when empty */
    }

    /* The row in `slot`, once its copy has completed (the caller waited for it). */
    __device__ Cells read(int slot) const
    {
        Cells r;
#pragma unroll
        for (int c = 0; c < N; c++) {
            const float *src = at(slot, c);
            if constexpr (CH == 4) {
                const float4 q = *reinterpret_cast<const float4 *>(src);
                r.v[4 * c] = q.x; r.v[4 * c + 1] = q.y; r.v[4 * c + 2] = q.z; r.v[4 * c + 3] = q.w;
            } else if constexpr (CH == 2) {
                const float2 q = *reinterpret_cast<const float2 *>(src);
                r.v[2 * c] = q.x; r.v[2 * c + 1] = q.y;
            } else {
                r.v[c] = src[0];
            }
        }
        return r;
    }
};

/* Everything a warp's march needs to know about its strip and segment. */
struct Strip {
    int nx, ny;
    int x;              /* this lane's first column */
    int oy, y_end;      /* rows stored: oy .. y_end-1 */
    bool stores;        /* this lane's columns are among the strip's stored ones */
};

/* One iteration of the pipeline: row y0 = oy - K + i enters at time 0 (from the ring),
 * stage j (north row A[j], mid row B[j]) computes row y0-1-j at time j+1, and A[j]
 * takes the incoming south row, so that after the call B is the north and A the mid:
 * the next call passes them the other way round.  k: sweeps of this pass (stages k ..
 * K-1 pass their mid row through unchanged when !FULL). */
template <bool EDGE, bool FULL, bool ALIGNED>
__device__ __forceinline__ void pipeline_step(int i, Cells (&A)[K_MAX], Cells (&B)[K_MAX],
                                              const Ring<ALIGNED> &ring, const float *__restrict__ in,
                                              float *__restrict__ out, const Strip &s, int k,
                                              const stencil2d_coeffs &c, unsigned edge_cols,
                                              const bool (&col_ok)[Chunk<ALIGNED>::N])
{
    const int y0 = s.oy - K_MAX + i;
    ring.fetch((i + AHEAD) & (RING - 1), in, s.nx, s.ny, s.x, y0 + AHEAD, col_ok);
    __pipeline_wait_prior(AHEAD);                       /* row y0's copy is complete */
    Cells south = ring.read(i & (RING - 1));

#pragma unroll
    for (int j = 0; j < K_MAX; j++) {
        const float west = __shfl_up_sync(0xffffffffu, B[j].v[VEC - 1], 1);   /* cell x-1 */
        const float east = __shfl_down_sync(0xffffffffu, B[j].v[0], 1);       /* cell x+VEC */
        Cells o;
#pragma unroll
        for (int q = 0; q < VEC; q++) {
            const float xm = q == 0 ? west : B[j].v[q > 0 ? q - 1 : 0];
            const float xp = q == VEC - 1 ? east : B[j].v[q < VEC - 1 ? q + 1 : 0];
            o.v[q] = stencil_point(c, B[j].v[q], xm, xp, A[j].v[q], south.v[q]);
        }
        if (EDGE) {
            /* Dirichlet: boundary cells keep their value.  Cells outside the grid need
             * no care: they feed only boundary cells, whose results are dropped here. */
            const int y = y0 - 1 - j;                   /* the row stage j computes */
            if (y == 0 || y == s.ny - 1) {              /* the same for the whole warp */
                o = B[j];
            } else if (edge_cols != 0) {                /* lanes holding column 0 or nx-1 */
#pragma unroll
                for (int q = 0; q < VEC; q++)
                    if (edge_cols & (1u << q))
                        o.v[q] = B[j].v[q];
            }
        }
        if (!FULL && j >= k)
            o = B[j];                                   /* a shorter pass: no sweep here */
        A[j] = south;                                   /* the dead north row becomes the mid */
        south = o;                                      /* the next stage's south row */
    }

    /* south is row y0-K at time k: stored once it lies in the segment. */
    const int y = y0 - K_MAX;
    if (s.stores && y >= s.oy && y < s.y_end) {
        float *p = out + (size_t)y * s.nx + s.x;
        if constexpr (ALIGNED) {
#pragma unroll
            for (int q = 0; q < VEC; q += Chunk<true>::CH) {
                if (!EDGE || s.x + q < s.nx) {          /* chunk wholly inside or outside */
                    if constexpr (Chunk<true>::CH == 4)
                        *reinterpret_cast<float4 *>(p + q) =
                            make_float4(south.v[q], south.v[q + 1], south.v[q + 2], south.v[q + 3]);
                    else
                        *reinterpret_cast<float2 *>(p + q) = make_float2(south.v[q], south.v[q + 1]);
                }
            }
        } else {
#pragma unroll
            for (int q = 0; q < VEC; q++)
                if (s.x + q < s.nx)
                    p[q] = south.v[q];
        }
    }
}

/* A warp's whole march down its segment. */
template <bool EDGE, bool FULL, bool ALIGNED>
__device__ __forceinline__ void march(const Ring<ALIGNED> &ring, const float *__restrict__ in,
                                      float *__restrict__ out, const Strip &s, int k,
                                      const stencil2d_coeffs &c)
{
    unsigned edge_cols = 0;                             /* bit q: cell x+q is column 0 or nx-1 */
#pragma unroll
    for (int q = 0; q < VEC; q++)
        if (s.x + q == 0 || s.x + q == s.nx - 1)
            edge_cols |= 1u << q;
    bool col_ok[Chunk<ALIGNED>::N];                     /* copy c's columns lie in the grid */
#pragma unroll
    for (int q = 0; q < Chunk<ALIGNED>::N; q++) {
        const int xc = s.x + q * Chunk<ALIGNED>::CH;
        col_ok[q] = xc >= 0 && xc + Chunk<ALIGNED>::CH - 1 < s.nx;
    }

    /* Stage j's two rows, zero before the pipeline has filled them. */
    Cells P[K_MAX], Q[K_MAX];
#pragma unroll
    for (int j = 0; j < K_MAX; j++)
#pragma unroll
        for (int q = 0; q < VEC; q++)
            P[j].v[q] = Q[j].v[q] = 0.0f;

    /* The first AHEAD rows in flight before the march starts. */
#pragma unroll
    for (int a = 0; a < AHEAD; a++)
        ring.fetch(a, in, s.nx, s.ny, s.x, s.oy - K_MAX + a, col_ok);

    /* Rows oy-K .. y_end+K-1 enter (2K more than are stored); an even trip count,
     * since each trip is two iterations with the rows' roles swapped. */
    const int iters = s.y_end - s.oy + 2 * K_MAX;
#pragma unroll 1
    for (int i = 0; i < iters; i += 2) {
        pipeline_step<EDGE, FULL, ALIGNED>(i, P, Q, ring, in, out, s, k, c, edge_cols, col_ok);
        pipeline_step<EDGE, FULL, ALIGNED>(i + 1, Q, P, ring, in, out, s, k, c, edge_cols, col_ok);
    }
    __pipeline_wait_prior(0);                           /* no copy outlives the block */
}

/* One pass: k sweeps (k == K_MAX when FULL) in -> out.  See the header comment. */
template <bool FULL, bool ALIGNED>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fused_sweeps_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                    int strips, int blocks_x, int k, stencil2d_coeffs c)
{
    constexpr int CH = Chunk<ALIGNED>::CH, N = Chunk<ALIGNED>::N;
    __shared__ __align__(16) float ring_mem[RING * N * THREADS * CH];

    const int t = threadIdx.x;
    const int sy = blockIdx.x / blocks_x;               /* segment: one division per block */
    const int sx = (blockIdx.x - sy * blocks_x) * WARPS + t / WARP;   /* this warp's strip */
    if (sx >= strips)
        return;                                         /* the whole warp: no barrier below */

    Strip s;
    s.nx = nx;
    s.ny = ny;
    const int x0 = sx * STORED - HALO;                  /* the strip's first column */
    const int lane = t % WARP;
    s.x = x0 + VEC * lane;
    s.oy = sy * SEG;
    s.y_end = min(s.oy + SEG, ny);
    s.stores = VEC * lane >= HALO && VEC * lane < HALO + STORED;
    const Ring<ALIGNED> ring{ring_mem + t * CH};

    const bool interior = ALIGNED && FULL && x0 >= 1 && x0 + STRIP <= nx - 1 &&
                          s.oy - K_MAX >= 1 && s.y_end + K_MAX <= ny - 1;
    if (interior)
        march<false, FULL, ALIGNED>(ring, in, out, s, k, c);
    else
        march<true, FULL, ALIGNED>(ring, in, out, s, k, c);
}

/* One pass of k (1 <= k <= K_MAX) sweeps in -> out, launched on `stream`. */
template <bool ALIGNED>
static void pass(int k, const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                 cudaStream_t stream)
{
    const int strips = (nx + STORED - 1) / STORED;
    const int blocks_x = (strips + WARPS - 1) / WARPS;
    const int segments = (ny + SEG - 1) / SEG;
    const int blocks = blocks_x * segments;
    if (k == K_MAX)
        fused_sweeps_kernel<true, ALIGNED><<<blocks, THREADS, 0, stream>>>(in, out, nx, ny, strips,
                                                                          blocks_x, k, c);
    else
        fused_sweeps_kernel<false, ALIGNED><<<blocks, THREADS, 0, stream>>>(in, out, nx, ny, strips,
                                                                           blocks_x, k, c);
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    if (steps <= 0)
        return d_a;
    const bool aligned = nx % 4 == 0 && (size_t)d_a % 16 == 0 && (size_t)d_b % 16 == 0;

    /* P passes of at most K_MAX sweeps, P with the parity of `steps` (so that
     * the result lands where stencil_lab.h says); P <= steps, since P ==
     * steps already has the right parity. */
    int passes = (steps + K_MAX - 1) / K_MAX;
    if ((passes - steps) % 2 != 0)
        passes++;
    const int base = steps / passes, longer = steps % passes;   /* `longer` passes of base+1 */

    float *src = d_a, *dst = d_b;
    for (int p = 0; p < passes; p++) {
        const int k = base + (p < longer ? 1 : 0);
        if (aligned)
            pass<true>(k, src, dst, nx, ny, c, stream);
        else
            pass<false>(k, src, dst, nx, ny, c, stream);
        float *tmp = src;                                /* this pass's output is the next input */
        src = dst;
        dst = tmp;
    }
    return src;
}
