/*
 * Lab 8 reference: temporal blocking.  `steps` Dirichlet sweeps in passes of
 * up to K = 8 sweeps each: one pass reads the grid from DRAM once, applies
 * its sweeps on the chip, and writes the grid once.
 *
 * What changed since lab 4, and why
 * ---------------------------------
 * Lab 4 reached the copy bandwidth per sweep: every sweep read and wrote the
 * whole grid, so it could not get faster.  Here one kernel launch (a pass)
 * applies k <= K sweeps, and the grid crosses DRAM once per pass instead of
 * once per sweep.  The bench still counts the compulsory bytes of `steps`
 * separate sweeps, so the effective bandwidth may exceed the copy bandwidth,
 * up to K times it (lab.json's bench.max_fused_sweeps bounds the ratio).
 *
 * The pass is lab 4's march, chained K times.  A block owns a strip of the
 * grid W = THREADS * 4 = 512 columns wide and SEG = 256 rows tall (plus a
 * halo), and walks down it one row per iteration.  Each thread owns a float4
 * (4 consecutive cells) of every row, as in lab 4.  Lab 4's march computed a
 * row from the rows above and below in the thread's registers and from x
 * neighbours in a shared-memory row buffer; here the march is a pipeline of
 * k stages, stage j applying sweep j+1:
 *
 *     iteration i loads row y0 = (first row) - k + i at time 0, and then
 *     stage 0 computes row y0-1 at time 1 from rows y0-2, y0-1, y0 at time 0,
 *     stage 1 computes row y0-2 at time 2 from rows y0-3, y0-2, y0-1 at time 1,
 *     ...
 *     stage k-1 computes row y0-k at time k, which is stored.
 *
 * Each stage keeps its north and mid rows (time j) in the thread's
 * registers; its south row is the row the stage before it produced in this
 * very iteration, also in the same thread's registers, since a thread owns
 * the same columns at every time.  Only the x neighbours cross threads, and
 * only at a float4's two ends: the cell left of a thread's first cell is its
 * left neighbour's last cell, the cell right of its last is its right
 * neighbour's first.  So each stage publishes just its mid row's first and
 * last cells in shared memory (`edge`), and since every stage's mid row was
 * computed in the previous iteration, all k stages publish at once, before
 * one barrier per iteration: one __syncthreads() per row for all k sweeps.
 *
 * The cost: redundant halo work.  Sweep j+1 of a cell needs its neighbours at
 * time j, so a pass of k sweeps over an output region needs the input k cells
 * beyond it on each side, and the stages compute cells that the neighbouring
 * blocks also compute (the valid region shrinks by one cell per sweep, the
 * overlapped tiling of AN5D and of "3.5D blocking").  Here the halo is
 * H = roundup(k, 4) columns on each side of a strip (a whole float4, so that
 * loads stay aligned) and k rows above and below a segment: a strip of 512
 * columns stores 512 - 2H, and a segment of 256 rows computes 256 + 2k rows.
 * For k = 8: (512 / 496) x (272 / 256) = 1.10 cell updates per useful one,
 * and (272 / 256) = 1.06 row reads per stored row (the halo columns of a
 * strip are the neighbouring strip's body, read at the same time: L2 hits).
 *
 * Bitwise equal to separate sweeps
 * --------------------------------
 * Every cell of every stage is computed by stencil_point from the same five
 * time-j values as sweep j+1 of lab 4 would use, in the order of the CPU
 * reference (grader/harness/cpu_reference.c):
 *     ((((c0*c + xm*w) + xp*e) + ym*s) + yp*n)
 * with each product and each sum rounded on its own (__fmul_rn, __fadd_rn).
 * nvcc would otherwise contract `a*b + c` into one fused multiply-add with a
 * single rounding (-fmad=true is its default), while the CPU reference,
 * compiled by gcc -std=c11 (which does not contract) for x86-64 (no FMA
 * instruction by default), rounds twice: the results would differ in the
 * last bits, and lab 8's tolerance is zero (lab.json).  Boundary cells keep
 * their value at every time, bit for bit.  Cells outside the grid hold 0 and
 * keep it; they feed only boundary cells, which are copied, or cells of the
 * halo, which are never stored.
 *
 * Measured (NVIDIA H100 80GB HBM3, CUDA 13.0, 2026-11-23, bench grid 16384 x
 * 8192, 16 sweeps per call): `make check` 2.325 ms per call, 7391 GB/s
 * effective, 2.50 x the copy bandwidth of 2959 GB/s measured in the same run.
 * A development sweep of this design on the same GPU and day (a standalone
 * timing program, not part of the kit; the handout's table) gave 0.91 x copy at K = 1, 1.81 at K = 2, 2.46
 * at K = 4, 2.50 at K = 8 and 1.71 at K = 16 (208 registers: 2 blocks per
 * SM); 2.77 at K = 8 with SEG = 128 and 2.92 with float2 cells instead of
 * float4; 2.73 with fused multiply-adds, which this lab's bitwise check
 * rejects.  The 128 x 64 overlapped tile reached 1.00 (256 threads) and 1.46
 * (512 threads) at K = 8.
 *
 * Passes and the returned buffer
 * ------------------------------
 * stencil2d_run splits `steps` into P passes of at most K sweeps, as even as
 * possible (P = ceil(steps / K), plus one when that makes P and `steps`
 * differ in parity, so that the result is in d_a after an even number of
 * steps and in d_b after an odd number, as stencil_lab.h states; the bench's
 * 16 steps take 2 passes of 8).  Each pass is one launch on `stream`, reading
 * one buffer and writing the other; kernels on one stream run in order.
 *
 * Preconditions
 * -------------
 *   Fast path (VEC = 4): nx % 4 == 0 and both buffers 16-byte aligned, so that
 *   every float4 access is aligned (strip origins and halos are multiples of
 *   4 columns).  Other widths: the same kernel with VEC = 1, one cell per
 *   thread, a strip of 128 columns.
 *   blockDim = (THREADS, 1) = (128, 1); a 1D grid of strips x segments blocks
 *   (no gridDim.y limit: lab 4's multi-launch loop for tall grids is gone).
 *   Static shared memory 2 * k * 2 * (THREADS + 2) * 4 bytes = 16,640 bytes
 *   for k = 8.  Registers: 2 rows of VEC floats per stage, about 114 per
 *   thread for k = 8, VEC = 4 (-Xptxas -v, CUDA 13.0, sm_90).
 *   Any nx, ny >= 1; steps >= 0 (steps <= 0 returns d_a untouched).
 *
 * Per-thread contract
 * -------------------
 *   Block b is strip sx = b % strips, segment sy = b / strips.  Thread t owns
 *   columns x .. x+VEC-1, x = sx * OW - H + VEC * t (OW = W - 2H stored
 *   columns per strip), of rows sy*SEG - k .. min(sy*SEG + SEG, ny) + k - 1.
 *   It stores its cells of rows sy*SEG .. min(sy*SEG + SEG, ny) - 1 when its
 *   columns are among the strip's OW stored ones and inside the grid.  Every
 *   thread takes every barrier: the trip count depends on the block only.
 *
 * Why every edge read is safe
 * ---------------------------
 *   Global loads: a thread's VEC cells are loaded only when 0 <= x and
 *   x + VEC - 1 < nx (VEC = 4: nx % 4 == 0 and x % 4 == 0, so x < nx is enough)
 *   and 0 <= y < ny; zeros otherwise.
 *   Shared reads: thread t reads slots t and t+2 of a stage's edge arrays,
 *   which threads t-1 and t+1 wrote before this iteration's barrier; slots 0
 *   and THREADS+1, read by the strip's outermost threads, are zeroed once
 *   before the first barrier and never written again.  The buffers alternate
 *   between iterations (i & 1): a thread writes a buffer again two iterations
 *   later, after the barrier of the iteration in between, which every thread
 *   reaches only when it has finished reading that buffer.
 *   Validity: a zero that stands for a cell outside the strip is wrong after
 *   sweep 1; it corrupts one more column per sweep, so after k sweeps the
 *   outermost k <= H columns are wrong and none of them is stored.  Rows
 *   likewise: the pipeline starts k rows above the segment with zeros for
 *   the rows before that, and stage j is exact from iteration 2(j+1) on; the
 *   first row stored, at iteration 2k, is exact.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int K_MAX = 8;                      /* at most this many sweeps per pass */
constexpr int THREADS = 128;                  /* threads per block, all along x */
constexpr int SEG = 256;                      /* rows a block stores (its segment) */

static_assert(K_MAX >= 1 && SEG >= 1, "a pass fuses at least one sweep");
static_assert(THREADS * 1 > 2 * K_MAX, "a scalar strip must store at least one column");

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
template <int VEC>
struct Cells {
    float v[VEC];
};

/* Row y of this thread's columns, or zeros outside the grid. */
template <int VEC>
__device__ __forceinline__ Cells<VEC> load_cells(const float *__restrict__ in, int nx, int ny, int x,
                                                 int y, bool inside)
{
    Cells<VEC> r;
    if (inside && y >= 0 && y < ny) {
        const float *p = in + (size_t)y * nx + x;
        if constexpr (VEC == 4) {
            const float4 q = *reinterpret_cast<const float4 *>(p);
            r.v[0] = q.x; r.v[1] = q.y; r.v[2] = q.z; r.v[3] = q.w;
        } else {
#pragma unroll
            for (int k = 0; k < VEC; k++)
                r.v[k] = p[k];
        }
    } else {
#pragma unroll
        for (int k = 0; k < VEC; k++)
            r.v[k] = 0.0f;
    }
    return r;
}

template <int VEC>
__device__ __forceinline__ void store_cells(float *__restrict__ out, int nx, int x, int y,
                                            const Cells<VEC> &r)
{
    float *p = out + (size_t)y * nx + x;
    if constexpr (VEC == 4) {
        *reinterpret_cast<float4 *>(p) = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
    } else {
#pragma unroll
        for (int k = 0; k < VEC; k++)
            p[k] = r.v[k];
    }
}

/* Halo columns on each side of a strip for a pass of KS sweeps: at least KS,
 * rounded up to whole VEC-cell groups so that strips stay aligned. */
__host__ __device__ constexpr int halo_cols(int ks, int vec) { return (ks + vec - 1) / vec * vec; }

/* Columns a strip stores: its width minus the halo on both sides. */
__host__ __device__ constexpr int stored_cols(int ks, int vec)
{
    return THREADS * vec - 2 * halo_cols(ks, vec);
}

/* One pass: KS sweeps in -> out.  See the header comment for the pipeline. */
template <int KS, int VEC>
__global__ void __launch_bounds__(THREADS)
fused_sweeps_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                    int strips, stencil2d_coeffs c)
{
    constexpr int H = halo_cols(KS, VEC);
    constexpr int OW = stored_cols(KS, VEC);
    static_assert(OW > 0, "the strip is narrower than its two halos");

    /* edge[parity][stage][0][t+1]: first cell of thread t's mid row of that
     * stage; edge[..][1][t+1]: its last cell.  Slots 0 and THREADS+1 stand for
     * the columns just outside the strip: zero, never written in the loop. */
    __shared__ float edge[2][KS][2][THREADS + 2];

    const int t = threadIdx.x;
    const int sy = blockIdx.x / strips;                  /* segment: one division per block */
    const int sx = blockIdx.x - sy * strips;             /* strip */
    const int x = sx * OW - H + VEC * t;                 /* this thread's first column */
    const int oy = sy * SEG;                             /* first row the block stores */
    const int y_end = min(oy + SEG, ny);                 /* one past the last */
    const bool inside = x >= 0 && x + VEC - 1 < nx;
    const bool stores = inside && VEC * t >= H && VEC * t < H + OW;
    const int iters = (y_end - oy) + 2 * KS;             /* block-uniform trip count */

    for (int s = t; s < 2 * KS * 2; s += THREADS) {
        float *e = &edge[0][0][0][0] + s * (THREADS + 2);
        e[0] = 0.0f;
        e[THREADS + 1] = 0.0f;
    }

    /* Stage j's window: rows y-1 (north) and y (mid) at time j, where y is
     * the row it computes next.  Zero before the pipeline has filled it. */
    Cells<VEC> north[KS], mid[KS];
#pragma unroll
    for (int j = 0; j < KS; j++)
#pragma unroll
        for (int k = 0; k < VEC; k++)
            north[j].v[k] = mid[j].v[k] = 0.0f;

    /* One row requested ahead: row y0+1 is in flight while row y0 is computed. */
    Cells<VEC> next = load_cells<VEC>(in, nx, ny, x, oy - KS, inside);

    for (int i = 0; i < iters; i++) {
        const int y0 = oy - KS + i;                      /* the row entering at time 0 */
        Cells<VEC> south = next;                         /* stage 0's south row */
        next = load_cells<VEC>(in, nx, ny, x, y0 + 1, inside);

        /* Publish every stage's mid-row ends, then one barrier for all stages. */
        float(*e)[2][THREADS + 2] = edge[i & 1];
#pragma unroll
        for (int j = 0; j < KS; j++) {
            e[j][0][t + 1] = mid[j].v[0];
            e[j][1][t + 1] = mid[j].v[VEC - 1];
        }
        __syncthreads();

#pragma unroll
        for (int j = 0; j < KS; j++) {
            const int y = y0 - 1 - j;                    /* row of stage j, computed at time j+1 */
            const bool row_inner = y > 0 && y < ny - 1;
            const float west = e[j][1][t];               /* cell x-1: left neighbour's last */
            const float east = e[j][0][t + 2];           /* cell x+VEC: right neighbour's first */
            Cells<VEC> o;
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xm = k == 0 ? west : mid[j].v[k > 0 ? k - 1 : 0];
                const float xp = k == VEC - 1 ? east : mid[j].v[k < VEC - 1 ? k + 1 : 0];
                const bool inner = row_inner && x + k > 0 && x + k < nx - 1;
                o.v[k] = inner ? stencil_point(c, mid[j].v[k], xm, xp, north[j].v[k], south.v[k])
                               : mid[j].v[k];            /* boundary or outside: unchanged */
            }
            north[j] = mid[j];                           /* slide stage j's window down a row */
            mid[j] = south;
            south = o;                                   /* the next stage's south row */
        }

        /* south is now row y0-k at time k: stored once the pipeline is full. */
        if (i >= 2 * KS && stores)
            store_cells<VEC>(out, nx, x, y0 - KS, south);
    }
}

/* One pass of KS sweeps in -> out, launched on `stream`. */
template <int KS, int VEC>
static void launch_pass(const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                        cudaStream_t stream)
{
    constexpr int OW = stored_cols(KS, VEC);
    const int strips = (nx + OW - 1) / OW;
    const int segments = (ny + SEG - 1) / SEG;
    fused_sweeps_kernel<KS, VEC><<<strips * segments, THREADS, 0, stream>>>(in, out, nx, ny, strips, c);
}

/* A pass of k (1 <= k <= K_MAX) sweeps: k is a template argument, so that the
 * stages unroll and their windows stay in registers. */
template <int VEC>
static void pass(int k, const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                 cudaStream_t stream)
{
    static_assert(K_MAX == 8, "one case per pass length");
    switch (k) {
    case 1: launch_pass<1, VEC>(in, out, nx, ny, c, stream); break;
    case 2: launch_pass<2, VEC>(in, out, nx, ny, c, stream); break;
    case 3: launch_pass<3, VEC>(in, out, nx, ny, c, stream); break;
    case 4: launch_pass<4, VEC>(in, out, nx, ny, c, stream); break;
    case 5: launch_pass<5, VEC>(in, out, nx, ny, c, stream); break;
    case 6: launch_pass<6, VEC>(in, out, nx, ny, c, stream); break;
    case 7: launch_pass<7, VEC>(in, out, nx, ny, c, stream); break;
    default: launch_pass<8, VEC>(in, out, nx, ny, c, stream); break;
    }
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    if (steps <= 0)
        return d_a;
    const bool vec4 = nx % 4 == 0 && (size_t)d_a % 16 == 0 && (size_t)d_b % 16 == 0;

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
        if (vec4)
            pass<4>(k, src, dst, nx, ny, c, stream);
        else
            pass<1>(k, src, dst, nx, ny, c, stream);
        float *tmp = src;                                /* this pass's output is the next input */
        src = dst;
        dst = tmp;
    }
    return src;
}
