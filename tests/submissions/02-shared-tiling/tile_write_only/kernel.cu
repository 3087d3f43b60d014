/* Known cheat (tile_write_only): lab 1's kernel that also writes each cell into a shared tile
 * (volatile, so that nvcc keeps it) and never reads it back: the launch holds a tile's bytes, but
 * the kernel's PTX has no ld.shared, so the tile rule fails ("constraint"), below tile_twin. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    volatile __shared__ float tile[BLOCK_Y + 2][BLOCK_X + 2];
    const int x = blockIdx.x * BLOCK_X + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * BLOCK_Y + threadIdx.y; y < ny; y += gridDim.y * BLOCK_Y) {
        const size_t i = (size_t)y * nx + x;
        tile[threadIdx.y + 1][threadIdx.x + 1] = in[i];   /* written, never read */
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? in[i]
                     : c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny, c);
}
