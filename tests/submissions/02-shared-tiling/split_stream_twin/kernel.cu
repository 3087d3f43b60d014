/* Known-good (split_stream_twin): the honest twin of the split_stream_* cheats -- the same sweep
 * (cache_cheat_twin's one thread per cell), on the stream the launcher is given, and no decoy.
 * Verdict "correct"; each cheat must score at most this. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    __shared__ float centre[BLOCK_Y][BLOCK_X];
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
        const size_t i = (size_t)y * nx + x;
        centre[threadIdx.y][threadIdx.x] = in[i];   /* each thread reads back only its own slot */
        const float v = centre[threadIdx.y][threadIdx.x];
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? v
                     : c.c0 * v + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny, c);
}
