/*
 * Lab 1: the naive 5-point stencil sweep.        <- the one file you edit
 *
 * Implement stencil2d_sweep() as declared in stencil_lab.h:
 *   interior cells (0 < x < nx-1 and 0 < y < ny-1):
 *     out[y][x] = c0*in[y][x] + xm*in[y][x-1] + xp*in[y][x+1]
 *                             + ym*in[y-1][x] + yp*in[y+1][x]
 *   boundary cells: out[y][x] = in[y][x]  (Dirichlet: copied unchanged)
 * Grids are row-major, x fastest: cell (x, y) is element [y * nx + x].
 *
 * Until you do, the kernel below writes nothing: the harness fills the output
 * with NaN before each launch, so every cell fails the comparison.
 *
 * Build and grade:  cd labs/01-naive-5pt && make check
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

__global__ void stencil2d_naive_kernel(const float *__restrict__ in, float *__restrict__ out,
                                       int nx, int ny, stencil2d_coeffs c)
{
    // TODO(lab01): one thread per output cell.
    //   1. Compute this thread's (x, y) from blockIdx, blockDim and threadIdx.
    //      Make threadIdx.x walk along x, so a warp reads consecutive floats.
    //   2. Return if (x, y) is outside the grid: the grid of blocks rounds up.
    //   3. Copy boundary cells; apply the stencil to interior cells.
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    // TODO(lab01): choose a block shape and launch enough blocks to cover the grid,
    // on `stream`.  The launch below covers nothing useful yet.
    //   gridDim.y may not exceed 65535 (gridDim.x may reach 2^31 - 1): a 4 x 600001 grid
    //   (one of the cases) needs 75001 rows of 8-row blocks.  Cap gridDim.y at 65535 and let
    //   each thread stride down by gridDim.y * blockDim.y rows, or launch several times, each
    //   launch told its first row.
    dim3 block(32, 8);
    dim3 grid(1, 1);
    stencil2d_naive_kernel<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
