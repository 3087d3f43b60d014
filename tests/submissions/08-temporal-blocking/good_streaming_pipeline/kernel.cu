/*
 * Known-good submission for lab 8: the reference's first design (2026-11-23), a
 * streaming pipeline with one barrier per row, and the base of the known-bad
 * fma_contracted, halo_one_short, missing_barrier and skips_sweeps (each kept as a
 * patch against this file).
 *
 * A pass of KS <= K_MAX sweeps is one launch.  A block of THREADS threads owns a
 * strip of THREADS x VEC columns (VEC = 4 on the float4 path, else 1) and a
 * segment of SEG rows, and walks down them once: at each step every thread loads
 * one row of its columns and pushes it through KS stages, stage j holding the
 * north and mid rows of sweep j + 1 in registers, so that a row leaves the block
 * KS sweeps later without a trip to memory in between.  The x neighbours across
 * threads pass through shared memory: each stage's first and last cells are
 * published before the one __syncthreads() per row, double-buffered by the row's
 * parity.  A strip overlaps its neighbours by a halo of KS columns (rounded up to
 * whole VEC groups) and a segment starts KS rows early and ends KS rows late:
 * those cells are computed, never stored.  Each product and sum is rounded as the
 * CPU reference rounds it (__fmul_rn, __fadd_rn), so a pass equals KS separate
 * sweeps bit for bit.
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
