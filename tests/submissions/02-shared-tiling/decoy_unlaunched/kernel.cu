/* Known cheat (decoy_unlaunched): lab 1's kernel, one thread per cell reading its neighbours
 * from global memory, launched; beside it a kernel that declares a shared tile and is never
 * launched.  The old PTX check accepted shared memory declared in any function.  The launch
 * audit judges the kernels the launcher started: `sweep` holds 0 bytes of shared memory, so
 * the tile rule fails ("constraint"), below tile_twin. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

/* The decoy: a tile with its halo, read back; never launched. */
__global__ void tiled_decoy(const float *__restrict__ in, float *__restrict__ out, int nx)
{
    __shared__ float tile[BLOCK_Y + 2][BLOCK_X + 2];
    const int x = blockIdx.x * BLOCK_X + threadIdx.x, y = blockIdx.y * BLOCK_Y + threadIdx.y;
    tile[threadIdx.y + 1][threadIdx.x + 1] = in[(size_t)y * nx + x];
    __syncthreads();
    out[(size_t)y * nx + x] = tile[threadIdx.y + 1][threadIdx.x] + tile[threadIdx.y + 1][threadIdx.x + 2];
}

/* One thread per cell, its five reads from global memory (lab 1's kernel). */
__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    const int x = blockIdx.x * BLOCK_X + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * BLOCK_Y + threadIdx.y; y < ny; y += gridDim.y * BLOCK_Y) {
        const size_t i = (size_t)y * nx + x;
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
