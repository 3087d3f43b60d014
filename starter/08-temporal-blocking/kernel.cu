/*
 * Lab 8: temporal blocking, several sweeps per pass over memory.   <- the one file you edit
 *
 * Implement stencil2d_run() (stencil_lab.h), with lab 4's contract: `steps`
 * Dirichlet sweeps, ping-ponging d_a and d_b, returning the buffer that holds
 * the result (d_a after an even number of steps, d_b after an odd number).
 * What is new: one kernel launch (a pass) may apply several sweeps, K of
 * them, reading the grid from DRAM once and writing it once.  Lab 4 moved the
 * grid once per sweep and so could not beat the copy bandwidth; a pass of K
 * sweeps can, by up to K times (read the handout).
 *
 * This starter is CORRECT but slow on purpose: it runs one sweep per pass
 * with a shared-memory tile (lab 2's design), so `make check` passes every
 * case, scores the correctness points, and measures about the copy
 * bandwidth, which earns no performance points in this lab.  Keep it as
 * your baseline: every change you make must keep the results bit for bit.
 *
 * Bit for bit: lab.json's tolerance is zero.  A fused pass must compute every
 * cell from the same five values, with the same roundings, as K separate
 * sweeps.  stencil_point() below does the rounding exactly as the CPU
 * reference does; use it for every update (a plain `c.c0*centre + ...` lets
 * nvcc fuse multiplies and adds, which changes the last bits).
 *
 * The two designs the handout describes (choose one):
 *   - overlapped tile: a block loads its output tile plus a halo of K cells
 *     into shared memory, applies K sweeps there (each one over a region one
 *     cell smaller on every side, a barrier between sweeps), and writes the
 *     inner tile;
 *   - streaming pipeline (the reference's way): a march down a strip, with K
 *     stages per row, stage j applying sweep j+1 one row behind stage j-1,
 *     every stage's rows in registers; owning a strip per warp, the x
 *     neighbours can come from the next lane by shuffles, with no barrier.
 *
 * Build and grade:  cd labs/08-temporal-blocking && make check
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int TILE_X = 32;                    /* output tile: one cell per thread */
constexpr int TILE_Y = 8;
constexpr int IN_TILE_X = TILE_X + 2;         /* plus a halo of one cell: one sweep */
constexpr int IN_TILE_Y = TILE_Y + 2;

/* The 5-point update of one cell, rounded exactly as the CPU reference rounds
 * it (grader/harness/cpu_reference.c): each product, then each sum, left to
 * right.  __fmul_rn and __fadd_rn are never fused into an FMA by nvcc. */
__device__ __forceinline__ float stencil_point(const stencil2d_coeffs &c, float centre, float xm,
                                               float xp, float ym, float yp)
{
    float s = __fmul_rn(c.c0, centre);
    s = __fadd_rn(s, __fmul_rn(c.xm, xm));
    s = __fadd_rn(s, __fmul_rn(c.xp, xp));
    s = __fadd_rn(s, __fmul_rn(c.ym, ym));
    return __fadd_rn(s, __fmul_rn(c.yp, yp));
}

/* Cell (x, y) of the input, or 0 outside the grid. */
__device__ __forceinline__ float cell_or_zero(const float *__restrict__ in, int nx, int ny, int x,
                                              int y)
{
    return (x >= 0 && x < nx && y >= 0 && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
}

/* The baseline: ONE sweep in -> out, a 32 x 8 output tile per block staged in
 * shared memory with its one-cell halo.  A 1D grid of tiles (tile index ->
 * tile row and column by one division per block), so a tall grid needs no
 * second launch.  blockDim = (TILE_X, TILE_Y). */
__global__ void __launch_bounds__(TILE_X * TILE_Y)
one_sweep_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                 int tiles_x, stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_Y][IN_TILE_X];

    const int tile_row = blockIdx.x / tiles_x, tile_col = blockIdx.x - tile_row * tiles_x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = tile_col * TILE_X + tx, y = tile_row * TILE_Y + ty;
    const int r = ty + 1, s = tx + 1;                  /* this cell's slot in the tile */

    tile[r][s] = cell_or_zero(in, nx, ny, x, y);
    if (tx == 0)
        tile[r][0] = cell_or_zero(in, nx, ny, x - 1, y);
    if (tx == TILE_X - 1)
        tile[r][IN_TILE_X - 1] = cell_or_zero(in, nx, ny, x + 1, y);
    if (ty == 0)
        tile[0][s] = cell_or_zero(in, nx, ny, x, y - 1);
    if (ty == TILE_Y - 1)
        tile[IN_TILE_Y - 1][s] = cell_or_zero(in, nx, ny, x, y + 1);
    __syncthreads();

    if (x >= nx || y >= ny)
        return;
    float v = tile[r][s];
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1)
        v = stencil_point(c, v, tile[r][s - 1], tile[r][s + 1], tile[r - 1][s], tile[r + 1][s]);
    out[(size_t)y * nx + x] = v;
}

// TODO(lab08): write the fused kernel: one pass of KS sweeps in -> out, KS a
//   template parameter (so that loops over the sweeps unroll and per-sweep
//   arrays stay in registers).  For the overlapped tile:
//     1. load the output tile plus KS cells of halo on every side into
//        shared memory (zeros outside the grid);
//     2. for s = 1 .. KS: compute the region s cells inside the loaded one
//        from the other buffer (boundary cells keep their value), then
//        __syncthreads() before the next sweep reads it;
//     3. store the inner tile (only cells inside the grid).
//   Shared memory above 48 KB per block needs cudaFuncSetAttribute(kernel,
//   cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) before the launch.
//   For the streaming pipeline, start from your lab 4 kernel and read the
//   handout's section on it.

/* One sweep in -> out on `stream`. */
static void sweep(const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                  cudaStream_t stream)
{
    const int tiles_x = (nx + TILE_X - 1) / TILE_X, tiles_y = (ny + TILE_Y - 1) / TILE_Y;
    one_sweep_kernel<<<tiles_x * tiles_y, dim3(TILE_X, TILE_Y), 0, stream>>>(in, out, nx, ny,
                                                                            tiles_x, c);
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    // TODO(lab08): run the sweeps in passes of up to K fused sweeps: a pass of k
    //   sweeps reads src, writes dst, and then the two swap, as one sweep did in
    //   lab 4.  steps is any count >= 0, not a multiple of K in general (the
    //   tests use 0 to 24).  Keep the result where the header says it is: with
    //   P passes it ends in d_a when P is even, so P must have the parity of
    //   steps (one way: P = ceil(steps / K), plus one if the parities differ,
    //   and the sweeps shared out evenly over the P passes).
    //   Below, the baseline: one pass per sweep.
    float *src = d_a, *dst = d_b;
    for (int s = 0; s < steps; s++) {
        sweep(src, dst, nx, ny, c, stream);
        float *tmp = src;
        src = dst;
        dst = tmp;
    }
    return src;
}
