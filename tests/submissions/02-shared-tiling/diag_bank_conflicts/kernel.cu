/*
 * Diagnostic submission (profile: bank_conflicts): a correct shared-memory tile stored x-major.
 *
 * The tile is declared tile[IN_TILE_X][IN_TILE_Y] with IN_TILE_Y = 32 floats per x column, and
 * indexed tile[x][y].  The 32 lanes of a warp hold 32 consecutive x, whose slots lie 32 floats
 * (128 bytes) apart: all in the same one of shared memory's 32 banks.  Every store into the tile
 * and every read of it is a 32-way bank conflict, served in 32 wavefronts instead of 1 (handout 2,
 * "How much shared memory you can use").  Global loads and stores stay coalesced (threadIdx.x
 * walks x), so `make profile` must name the conflicts first; the grade is "correct".  Storing the
 * tile y-major, tile[y][x] as lab 2's reference does, removes them.
 *
 * Block (OUT_TILE_X, BLOCK_Y) = (32, 6); each thread owns ROWS_PER_THREAD = 5 rows of one column:
 * an output tile of 32 x 30 cells, an input tile of 34 x 32.  Cells outside the grid hold 0 and
 * are never read by an interior cell.  Any nx, ny >= 1 (tall grids: several launches).
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int OUT_TILE_X = 32, BLOCK_Y = 6, ROWS_PER_THREAD = 5;
constexpr int OUT_TILE_Y = BLOCK_Y * ROWS_PER_THREAD;        /* 30 */
constexpr int IN_TILE_X = OUT_TILE_X + 2, IN_TILE_Y = OUT_TILE_Y + 2;   /* 34, 32 */
constexpr int THREADS = OUT_TILE_X * BLOCK_Y;                /* 192 */
constexpr int MAX_GRID_Y = 65535;
static_assert(2 * OUT_TILE_Y <= THREADS, "one thread per halo-column cell");

__global__ void __launch_bounds__(THREADS)
sweep_conflicted(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int y_first,
                 stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_X][IN_TILE_Y];             /* tile[s][r]: cell (x0-1+s, y0-1+r) */
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * OUT_TILE_X + tx;
    const int x0 = blockIdx.x * OUT_TILE_X, y0 = y_first + blockIdx.y * OUT_TILE_Y, x = x0 + tx;

    for (int k = 0; k < ROWS_PER_THREAD; k++) {
        const int r = ty + k * BLOCK_Y, y = y0 + r;
        tile[1 + tx][1 + r] = (x < nx && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
    }
    if (ty == 0)
        tile[1 + tx][0] = (y0 >= 1 && x < nx) ? in[(size_t)(y0 - 1) * nx + x] : 0.0f;
    if (ty == BLOCK_Y - 1)
        tile[1 + tx][IN_TILE_Y - 1] = (y0 + OUT_TILE_Y < ny && x < nx) ? in[(size_t)(y0 + OUT_TILE_Y) * nx + x] : 0.0f;
    if (tid < 2 * OUT_TILE_Y) {
        const bool left = tid < OUT_TILE_Y;
        const int r = left ? tid : tid - OUT_TILE_Y, hx = left ? x0 - 1 : x0 + OUT_TILE_X, hy = y0 + r;
        tile[left ? 0 : IN_TILE_X - 1][1 + r] = (hx >= 0 && hx < nx && hy < ny) ? in[(size_t)hy * nx + hx] : 0.0f;
    }
    __syncthreads();

    if (x >= nx)
        return;
    const bool x_inner = x > 0 && x < nx - 1;
    for (int k = 0; k < ROWS_PER_THREAD; k++) {
        const int r = 1 + ty + k * BLOCK_Y, y = y0 + r - 1;
        if (y >= ny)
            break;
        const float centre = tile[1 + tx][r];
        float v = centre;                                     /* boundary cells: copied */
        if (x_inner && y > 0 && y < ny - 1)
            v = c.c0 * centre + c.xm * tile[tx][r] + c.xp * tile[2 + tx][r] + c.ym * tile[1 + tx][r - 1] +
                c.yp * tile[1 + tx][r + 1];
        out[(size_t)y * nx + x] = v;
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int tiles_x = (nx + OUT_TILE_X - 1) / OUT_TILE_X, tiles_y = (ny + OUT_TILE_Y - 1) / OUT_TILE_Y;
    for (int t = 0; t < tiles_y; t += MAX_GRID_Y) {
        const int n = tiles_y - t < MAX_GRID_Y ? tiles_y - t : MAX_GRID_Y;
        sweep_conflicted<<<dim3(tiles_x, n), dim3(OUT_TILE_X, BLOCK_Y), 0, stream>>>(d_in, d_out, nx, ny,
                                                                                 t * OUT_TILE_Y, c);
    }
}
