/* Known-bad (no_shared_memory): a correct kernel that ignores the lab's
 * technique -- lab 1's reference, one thread per cell with its five reads
 * from global memory.  Every case passes, but lab 2 requires shared memory:
 * the PTX declares no .shared variable, so the static check rejects it
 * (correctness still counts; performance gets no points). */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

__global__ void stencil2d_naive_kernel(const float *__restrict__ in, float *__restrict__ out,
                                       int nx, int ny, stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;                      /* the grid of blocks rounds up */
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
        const size_t i = (size_t)y * nx + x;
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
            out[i] = in[i];          /* Dirichlet boundary: copied */
            continue;
        }
        out[i] = c.c0 * in[i]
               + c.xm * in[i - 1] + c.xp * in[i + 1]
               + c.ym * in[i - nx] + c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 block(BLOCK_X, BLOCK_Y);
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    stencil2d_naive_kernel<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
