/* Known-bad (halo_off_by_one): the reference with the bottom halo row loaded
 * from global row y0 - ORDER + IN_TILE_Y, one past the tile's last row
 * (the index of the slot is IN_TILE_Y - 1, not IN_TILE_Y).  Every interior
 * cell in the last row of a tile gets the wrong y+1 neighbour, so every grid
 * with nx >= 3 and ny >= OUT_TILE_Y + 1 = 33 fails.  The load stays
 * guarded, so nothing is read outside the grid. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int ORDER = 1;                               /* neighbours on each side */
constexpr int OUT_TILE_X = 64;                         /* output columns per block = blockDim.x */
constexpr int BLOCK_Y = 4;                             /* blockDim.y */
constexpr int ROWS_PER_THREAD = 8;                     /* thread coarsening in y */
constexpr int OUT_TILE_Y = BLOCK_Y * ROWS_PER_THREAD;  /* 32 output rows per block */
constexpr int IN_TILE_X = OUT_TILE_X + 2 * ORDER;      /* 66 */
constexpr int IN_TILE_Y = OUT_TILE_Y + 2 * ORDER;      /* 34 */
constexpr int THREADS = OUT_TILE_X * BLOCK_Y;          /* 256 */
constexpr int MAX_GRID_Y = 65535;                      /* CUDA's limit on gridDim.y */

static_assert(ORDER == 1, "the halo loads below fetch one row and one column on each side");
static_assert(BLOCK_Y >= 2, "the top and bottom halo rows are loaded by different thread rows");
static_assert(2 * OUT_TILE_Y <= THREADS, "one thread per halo-column cell");

__global__ void __launch_bounds__(THREADS)
stencil2d_tiled_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                       int y_first, stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_Y][IN_TILE_X];       /* tile[r][s] holds cell (x0-1+s, y0-1+r) */

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * OUT_TILE_X + tx;
    const int x0 = blockIdx.x * OUT_TILE_X;            /* first output column of the tile */
    const int y0 = y_first + blockIdx.y * OUT_TILE_Y;  /* first output row of the tile */
    const int x = x0 + tx;                             /* this thread's column */

    /* 1. Issue every load before using any of them: ROWS_PER_THREAD body cells,
     *    plus one halo cell for some threads.  Cells outside the grid get 0. */
    float body[ROWS_PER_THREAD];
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++) {
        const int y = y0 + ty + k * BLOCK_Y;
        body[k] = (x < nx && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
    }

    /* Halo rows: thread row 0 loads the row above the tile, the last thread
     * row loads the row below it. */
    float halo_row = 0.0f;
    if (ty == 0 && y0 >= 1 && x < nx)
        halo_row = in[(size_t)(y0 - 1) * nx + x];
    /* BUG: one row too far; the slot is IN_TILE_Y - 1, the row y0 - ORDER + IN_TILE_Y - 1 */
    if (ty == BLOCK_Y - 1 && y0 - ORDER + IN_TILE_Y < ny && x < nx)
        halo_row = in[(size_t)(y0 - ORDER + IN_TILE_Y) * nx + x];

    /* Halo columns: threads 0 .. OUT_TILE_Y-1 load the column left of the
     * tile, the next OUT_TILE_Y threads the column right of it (corners are
     * not needed by a 5-point stencil). */
    const bool left_col = tid < OUT_TILE_Y;
    const bool right_col = tid >= OUT_TILE_Y && tid < 2 * OUT_TILE_Y;
    const int halo_r = left_col ? tid : tid - OUT_TILE_Y;       /* output row within the tile */
    const int halo_x = left_col ? x0 - 1 : x0 + OUT_TILE_X;
    const int halo_y = y0 + halo_r;
    float halo_col = 0.0f;
    if ((left_col || right_col) && halo_x >= 0 && halo_x < nx && halo_y < ny)
        halo_col = in[(size_t)halo_y * nx + halo_x];

    /* 2. Store them into the tile. */
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++)
        tile[ORDER + ty + k * BLOCK_Y][ORDER + tx] = body[k];
    if (ty == 0)
        tile[0][ORDER + tx] = halo_row;
    if (ty == BLOCK_Y - 1)
        tile[IN_TILE_Y - 1][ORDER + tx] = halo_row;
    if (left_col)
        tile[ORDER + halo_r][0] = halo_col;
    if (right_col)
        tile[ORDER + halo_r][IN_TILE_X - 1] = halo_col;

    /* 3. Wait until the whole tile is in shared memory: the neighbours read
     *    below were stored by other warps. */
    __syncthreads();

    /* 4. Compute and store this thread's cells. */
    if (x >= nx)
        return;                                        /* no barrier follows */
    const bool x_inner = x > 0 && x < nx - 1;
    const int s = ORDER + tx;                          /* tile column of x */
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++) {
        const int y = y0 + ty + k * BLOCK_Y;
        const int r = ORDER + ty + k * BLOCK_Y;        /* tile row of y */
        if (y >= ny)
            break;
        float v = body[k];                             /* boundary cells: copied, bit for bit */
        if (x_inner && y > 0 && y < ny - 1)
            v = c.c0 * body[k]
              + c.xm * tile[r][s - 1] + c.xp * tile[r][s + 1]
              + c.ym * tile[r - 1][s] + c.yp * tile[r + 1][s];
        out[(size_t)y * nx + x] = v;
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const dim3 block(OUT_TILE_X, BLOCK_Y);
    const int tiles_x = (nx + OUT_TILE_X - 1) / OUT_TILE_X;
    const int tiles_y = (ny + OUT_TILE_Y - 1) / OUT_TILE_Y;
    /* gridDim.y is at most 65535: a taller grid takes several launches. */
    for (int t = 0; t < tiles_y; t += MAX_GRID_Y) {
        const int n = tiles_y - t < MAX_GRID_Y ? tiles_y - t : MAX_GRID_Y;
        stencil2d_tiled_kernel<<<dim3(tiles_x, n), block, 0, stream>>>(d_in, d_out, nx, ny,
                                                                       t * OUT_TILE_Y, c);
    }
}
