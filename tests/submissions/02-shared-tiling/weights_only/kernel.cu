/* Known cheat (weights_only): stages only the five weights in shared memory (a real student's
 * shortcut) and reads every neighbour from global memory.  20 bytes of shared memory per block
 * are no tile: the block's input tile needs at least 4 bytes x (256 cells + their halo), so the
 * tile rule fails ("constraint"), below tile_twin. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    __shared__ float w[5];
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        w[0] = c.c0; w[1] = c.xm; w[2] = c.xp; w[3] = c.ym; w[4] = c.yp;
    }
    __syncthreads();
    const int x = blockIdx.x * BLOCK_X + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * BLOCK_Y + threadIdx.y; y < ny; y += gridDim.y * BLOCK_Y) {
        const size_t i = (size_t)y * nx + x;
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? in[i]
                     : w[0] * in[i] + w[1] * in[i - 1] + w[2] * in[i + 1] + w[3] * in[i - nx] + w[4] * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny, c);
}
