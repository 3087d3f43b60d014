/* Known-good (tile_twin): one thread per cell with its block's input tile (its rows plus a one-cell
 * halo) staged in shared memory, on the stream the launcher is given.  The honest twin of the
 * cheats that imitate it: cache_cheat (without its cache), printf_debug (without its printf), the
 * split_stream_* cheats (without the other stream and the decoy) and the tile-rule cheats
 * (decoy_unlaunched, decoy_launched, weights_only, tile_unused, tile_write_only: the tile they
 * only pretend to have).  Verdict "correct"; each cheat must score at most this.  cache_cheat,
 * printf_debug and the three split_stream_* cheats are kept as patches against this file, so
 * that they never drift apart from it. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

/* Cell (x, y) of the input, or 0 outside the grid. */
__device__ __forceinline__ float cell(const float *__restrict__ in, int nx, int ny, int x, int y)
{
    return x >= 0 && x < nx && y >= 0 && y < ny ? in[(size_t)y * nx + x] : 0.0f;
}

/* One thread per cell; the block's two rows and their halo (a cell on each side, a row above
 * and below) are staged in a shared tile, and the stencil reads its neighbours there. */
__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    __shared__ float tile[BLOCK_Y + 2][BLOCK_X + 2];   /* tile[r][s]: cell (x0 - 1 + s, y0 - 1 + r) */
    const int tx = threadIdx.x, ty = threadIdx.y, x = blockIdx.x * BLOCK_X + tx;
    for (int y0 = blockIdx.y * BLOCK_Y; y0 < ny; y0 += gridDim.y * BLOCK_Y) {   /* uniform per block */
        const int y = y0 + ty;
        tile[ty + 1][tx + 1] = cell(in, nx, ny, x, y);
        if (tx == 0)
            tile[ty + 1][0] = cell(in, nx, ny, x - 1, y);
        if (tx == BLOCK_X - 1)
            tile[ty + 1][BLOCK_X + 1] = cell(in, nx, ny, x + 1, y);
        if (ty == 0)
            tile[0][tx + 1] = cell(in, nx, ny, x, y - 1);
        if (ty == BLOCK_Y - 1)
            tile[BLOCK_Y + 1][tx + 1] = cell(in, nx, ny, x, y + 1);
        __syncthreads();
        if (x < nx && y < ny) {
            const size_t i = (size_t)y * nx + x;
            const float v = tile[ty + 1][tx + 1];
            const float r = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                                ? v
                                : c.c0 * v + c.xm * tile[ty + 1][tx] + c.xp * tile[ty + 1][tx + 2] +
                                      c.ym * tile[ty][tx + 1] + c.yp * tile[ty + 2][tx + 1];
            out[i] = r;
        }
        __syncthreads();                               /* the tile is refilled next round */
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny, c);
}
