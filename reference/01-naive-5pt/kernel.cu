/*
 * Lab 1 reference: the naive 5-point stencil sweep, one thread per cell.
 *
 * Thread-to-data mapping: threadIdx.x walks x, the contiguous dimension, so
 * the 32 lanes of a warp read 32 consecutive floats (one 128-byte line) for
 * each of the five loads; the y-1 and y+1 rows are also read by the blocks
 * above and below, and the caches (L1, then L2) absorb most of that reuse.
 * A 128x2 block keeps four warps on one or two rows, so each warp touches
 * whole lines.
 *
 * Arithmetic intensity as written: 9 FLOP (5 multiplies, 4 adds) per 5 loads
 * of 4 bytes = 0.45 OP/B, far left of any GPU's ridge point: the kernel is
 * bound by memory bandwidth, and what counts is how close it gets to the
 * copy bandwidth.
 *
 * Preconditions: none on nx, ny >= 1; blockDim = (BLOCK_X, BLOCK_Y), no shared memory.
 * gridDim.y may not exceed 65535, so on a grid taller than 65535 * BLOCK_Y
 * rows each thread strides down by the height of the whole launch.
 * Edge reads: a thread reads neighbours only when 0 < x < nx-1 and
 * 0 < y < ny-1, so x-1, x+1, y-1, y+1 are all inside the grid.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* Tunable (make tune, labs/01-naive-5pt/tune.json): -DTUNE_<NAME>=<value> replaces a default. */
#ifndef TUNE_BLOCK_X
#define TUNE_BLOCK_X 128
#endif
#ifndef TUNE_BLOCK_Y
#define TUNE_BLOCK_Y 2
#endif

enum { BLOCK_X = TUNE_BLOCK_X, BLOCK_Y = TUNE_BLOCK_Y, MAX_GRID_Y = 65535 };

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
