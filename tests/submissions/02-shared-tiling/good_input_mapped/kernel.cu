/* Known-good (good_input_mapped): the textbook's shared-memory tile, with
 * threads mapped onto the INPUT tile.  The block is as large as the input
 * tile (IN_TILE_X x IN_TILE_Y = 32 x 16 threads); every thread loads one cell,
 * including the halo, then only the inner (IN_TILE_X-2) x (IN_TILE_Y-2)
 * threads compute.  Correct for any grid; its speed may differ from the
 * reference's (on an H100 it is no faster than lab 1's kernel). */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int ORDER = 1;
constexpr int IN_TILE_X = 32;                      /* one warp per tile row: coalesced loads */
constexpr int IN_TILE_Y = 16;
constexpr int OUT_TILE_X = IN_TILE_X - 2 * ORDER;  /* 30 */
constexpr int OUT_TILE_Y = IN_TILE_Y - 2 * ORDER;  /* 14 */
constexpr int MAX_GRID_Y = 65535;

__global__ void __launch_bounds__(IN_TILE_X * IN_TILE_Y)
stencil2d_input_mapped_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                              int y_first, stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_Y][IN_TILE_X];

    /* This thread's input cell: the tile starts one cell up and left of the
     * output tile, so x and y may be -1 (outside the grid). */
    const int x = (int)blockIdx.x * OUT_TILE_X + (int)threadIdx.x - ORDER;
    const int y = y_first + (int)blockIdx.y * OUT_TILE_Y + (int)threadIdx.y - ORDER;
    const bool inside = x >= 0 && x < nx && y >= 0 && y < ny;

    tile[threadIdx.y][threadIdx.x] = inside ? in[(size_t)y * nx + x] : 0.0f;
    __syncthreads();

    /* Rim threads only loaded the halo; cells outside the grid are skipped. */
    const bool inner = threadIdx.x >= ORDER && threadIdx.x < IN_TILE_X - ORDER &&
                       threadIdx.y >= ORDER && threadIdx.y < IN_TILE_Y - ORDER;
    if (!inner || !inside)
        return;
    const int tx = threadIdx.x, ty = threadIdx.y;
    float v = tile[ty][tx];
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1)    /* neighbours are inside the grid */
        v = c.c0 * tile[ty][tx] + c.xm * tile[ty][tx - 1] + c.xp * tile[ty][tx + 1] +
            c.ym * tile[ty - 1][tx] + c.yp * tile[ty + 1][tx];
    out[(size_t)y * nx + x] = v;
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const dim3 block(IN_TILE_X, IN_TILE_Y);
    const int tiles_x = (nx + OUT_TILE_X - 1) / OUT_TILE_X;
    const int tiles_y = (ny + OUT_TILE_Y - 1) / OUT_TILE_Y;
    for (int t = 0; t < tiles_y; t += MAX_GRID_Y) {
        const int n = tiles_y - t < MAX_GRID_Y ? tiles_y - t : MAX_GRID_Y;
        stencil2d_input_mapped_kernel<<<dim3(tiles_x, n), block, 0, stream>>>(
            d_in, d_out, nx, ny, t * OUT_TILE_Y, c);
    }
}
