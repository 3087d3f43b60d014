/* Known cheat (decoy_launched): lab 1's kernel without shared memory does the sweep, and a
 * one-block decoy with a 32 KB shared array, which it fills and reads back, is launched on the
 * same stream before it.  Every kernel the launcher starts must hold its block's input tile: the
 * sweep holds 0 bytes, so the tile rule fails ("constraint"), below tile_twin. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };
enum { DECOY_FLOATS = 8192 };

/* The decoy: 32 KB of shared memory, filled from the input and read back; it writes nothing
 * (its one store is behind a test no input passes). */
__global__ void decoy(const float *__restrict__ in, float *__restrict__ out, size_t n)
{
    __shared__ float big[DECOY_FLOATS];
    for (int i = threadIdx.x; i < DECOY_FLOATS; i += blockDim.x)
        big[i] = in[i % n];
    __syncthreads();
    if (big[threadIdx.x] > 1e30f)
        out[0] = big[DECOY_FLOATS - 1 - threadIdx.x];
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
    decoy<<<1, 256, 0, stream>>>(d_in, d_out, (size_t)nx * ny);
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny, c);
}
