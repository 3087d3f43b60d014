/*
 * Lab 4 reference: `steps` Dirichlet sweeps kept on the GPU, each one a
 * march of wide strips down the grid with a shared-memory row buffer.
 *
 * What changed since labs 2 and 3, and why
 * ----------------------------------------
 * 1. The data stay on the GPU between time steps.  stencil2d_run launches one
 *    kernel per step on the caller's stream and swaps the two buffers'
 *    roles: d_a -> d_b -> d_a ...  Kernels on one stream run in order, so
 *    step s+1 starts after step s has written its output; the host never
 *    waits and nothing crosses the PCIe bus (the seeds' "Data2GPU" step,
 *    the largest step of their table).
 * 2. Wide strips, rows loaded contiguously (the seeds' "Max SMEM usage").
 *    A block of 128 threads owns a strip 512 cells wide and ROWS rows tall:
 *    each thread owns a float4 of 4 consecutive cells in each row, so one
 *    row of the strip is one fully coalesced 2 KB load.  The block marches
 *    down its rows.  The rows above and below the current one are in the
 *    thread's own registers (a window: north, mid, south); the current row
 *    is also written to a shared-memory row buffer, where each thread finds
 *    its x-1 neighbour (the last float of the float4 to its left) and its
 *    x+1 neighbour (the first float of the one to its right).  Two threads
 *    load the two cells just outside the strip.  Every global load is a
 *    whole row segment: (ROWS + 2) / ROWS of them per output row, the extra
 *    two rows being read by the blocks above and below too (L2 hits), plus
 *    two halo cells.  Lab 1 issues 5 loads per cell; the seeds' wide tile
 *    brought that to about 2.
 * 3. Every load of the block is in flight before it computes anything: the
 *    window holds all ROWS + 2 rows and is requested at the top of the
 *    kernel.  This matters most for speed: the textbook's register sliding
 *    window (a long march, one row requested per row computed) keeps only
 *    one or two rows in flight and stays short of the copy bandwidth, where
 *    a short march with every row requested first reaches it (the handout's
 *    table; `make tune` records ROWS = 2, 4 and 8 in labs/04-max-smem/tuning/).
 *    Many more rows cost registers and resident threads.  ROWS = 4 needs 40
 *    registers: 12 blocks per SM.
 * 4. The row buffer is double-buffered: consecutive rows alternate between
 *    two buffers, so a thread overwrites a buffer (two rows later) only after
 *    the barrier of the row in between, which every thread reaches only
 *    after it has finished reading that buffer.  One __syncthreads() per row
 *    is enough.
 *
 * Preconditions
 * -------------
 *   Fast path (stencil2d_march_kernel): nx % 4 == 0 and both buffers 16-byte
 *   aligned (the harness's buffers are 256-byte aligned), so every row starts
 *   on a 16-byte boundary and each float4 access is aligned.
 *   blockDim = (THREADS, 1) = (128, 1); static shared memory
 *   2 * ROW_BUF * 4 = 4160 bytes.  Any other nx takes the scalar fallback
 *   (stencil2d_tile_kernel): blockDim = (TILE_X, TILE_Y) = (32, 8), static
 *   shared memory IN_TILE_Y * IN_TILE_X * 4 = 10 * 34 * 4 = 1360 bytes.
 *   Any nx, ny >= 1; steps >= 0 (steps <= 0 returns d_a untouched).
 *
 * Per-thread contract (fast path)
 * -------------------------------
 *   Thread t of block (bx, by) owns the cells x .. x+3, x = bx * STRIP + 4t,
 *   of rows ya .. ya+rows-1, where ya = by * ROWS (plus the launch's first
 *   row) and rows = min(ROWS, ny - ya).  It requests rows ya-1 .. ya+ROWS
 *   of its four columns (threads 0 and THREADS-1 also the halo cells of the
 *   block's rows), then for each row writes its float4 (and halo cell) to
 *   the row buffer, waits at the barrier, and stores its 4 output cells.
 *   Threads past the right edge of the grid (x >= nx) load and store
 *   nothing, but still write zeros to the row buffer and take every barrier.
 *
 * Why every edge read is safe
 * ---------------------------
 *   Global loads: a float4 of row y is loaded only when x < nx (then
 *   x + 3 <= nx - 1, since nx % 4 == 0) and 0 <= y < ny; a halo cell only
 *   when it is inside the grid (x0 - 1 >= 0, or x0 + STRIP < nx) and its row
 *   is one of the block's rows.
 *   Shared reads: every slot is written before the barrier, with 0 where the
 *   cell is outside the grid.  Only the x-1 neighbour of cell x and the x+1
 *   neighbour of cell x+3 come from the buffer (the middle cells' neighbours
 *   are in the thread's own float4): the neighbouring thread's slot or a
 *   halo slot.  Such a slot holds a zero only when the cell is x == 0 or
 *   x + 3 == nx - 1, a boundary cell, which is copied instead.
 *   Register window: north and south are used only for 0 < y < ny - 1,
 *   where rows y-1 and y+1 exist and were loaded.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* Tunable (make tune, labs/04-max-smem/tune.json): -DTUNE_<NAME>=<value> replaces a default. */
#ifndef TUNE_THREADS
#define TUNE_THREADS 128
#endif
#ifndef TUNE_ROWS
#define TUNE_ROWS 4
#endif

constexpr int ORDER = 1;                      /* neighbours on each side: 5-point stencil */
constexpr int THREADS = TUNE_THREADS;         /* threads per block, all along x */
constexpr int VEC = 4;                        /* cells per thread per row: one float4 */
constexpr int STRIP = THREADS * VEC;          /* 512: the width of a block's strip */
constexpr int ROWS = TUNE_ROWS;               /* rows per block: a short march, loaded at once */
constexpr int PAD = VEC;                      /* the strip starts 16 bytes into the row buffer */
constexpr int ROW_BUF = PAD + STRIP + VEC;    /* 520 floats; halos at PAD-1 and PAD+STRIP */
constexpr int MAX_GRID_Y = 65535;             /* CUDA's limit on gridDim.y */

/* Scalar fallback: the lab 2 tile with one cell per thread. */
constexpr int TILE_X = 32;
constexpr int TILE_Y = 8;
constexpr int IN_TILE_X = TILE_X + 2 * ORDER;
constexpr int IN_TILE_Y = TILE_Y + 2 * ORDER;

static_assert(ORDER == 1, "one halo cell on each side of the strip");
static_assert(ROW_BUF % VEC == 0, "the second row buffer must start 16-byte aligned too");

/* The 5-point update of one cell, in the same order as the CPU reference. */
__device__ __forceinline__ float stencil_point(stencil2d_coeffs c, float centre, float xm,
                                               float xp, float ym, float yp)
{
    return c.c0 * centre + c.xm * xm + c.xp * xp + c.ym * ym + c.yp * yp;
}

/* This thread's float4 of row y, or zeros for a thread past the grid's edge. */
__device__ __forceinline__ float4 load_quad(const float *__restrict__ in, int nx, int y, int x,
                                            bool active)
{
    if (!active)
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    return *reinterpret_cast<const float4 *>(in + (size_t)y * nx + x);
}

/* The halo cell (hx, y) this thread loads, or 0 when it loads none (hx < 0). */
__device__ __forceinline__ float load_halo(const float *__restrict__ in, int nx, int y, int hx)
{
    return hx >= 0 ? in[(size_t)y * nx + hx] : 0.0f;
}

__global__ void __launch_bounds__(THREADS)
stencil2d_march_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                       int y_first, stencil2d_coeffs c)
{
    __shared__ __align__(16) float rowbuf[2][ROW_BUF];

    const int t = threadIdx.x;
    const int x0 = blockIdx.x * STRIP;               /* first column of the strip */
    const int x = x0 + t * VEC;                      /* this thread's first column */
    const bool active = x < nx;
    const int ya = y_first + blockIdx.y * ROWS;      /* first row of the block */
    const int rows = ny - ya < ROWS ? ny - ya : ROWS;   /* rows it computes: block-uniform */

    /* The halo cell this thread loads in every row: thread 0 the cell left of
     * the strip, thread THREADS-1 the cell right of it, when inside the grid. */
    int hx = -1;
    if (t == 0 && x0 > 0)
        hx = x0 - 1;
    if (t == THREADS - 1 && x0 + STRIP < nx)
        hx = x0 + STRIP;

    /* 1. Request every row of the march before computing any: window slot j
     *    holds row ya-1+j (north of the first row .. south of the last), zeros
     *    for rows outside the grid; halo[j] is the halo cell of row ya+j. */
    float4 win[ROWS + 2];
    float halo[ROWS];
#pragma unroll
    for (int j = 0; j < ROWS + 2; j++) {
        const int y = ya - 1 + j;
        win[j] = (y >= 0 && y < ny) ? load_quad(in, nx, y, x, active)
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int j = 0; j < ROWS; j++)
        halo[j] = j < rows ? load_halo(in, nx, ya + j, hx) : 0.0f;

    /* 2. March down the rows; row j's north, mid and south are win[j .. j+2]. */
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        if (j >= rows)
            break;                                   /* uniform: the whole block leaves */
        const int y = ya + j;
        const float4 north = win[j], mid = win[j + 1], south = win[j + 2];

        /* Publish row y in this row's half of the buffer. */
        float *row = rowbuf[j & 1];
        *reinterpret_cast<float4 *>(&row[PAD + t * VEC]) = mid;
        if (t == 0)
            row[PAD - 1] = halo[j];
        if (t == THREADS - 1)
            row[PAD + STRIP] = halo[j];
        __syncthreads();

        /* Compute row y: boundary rows and columns copied, bit for bit. */
        if (active) {
            float4 o = mid;
            if (y > 0 && y < ny - 1) {
                const float west = row[PAD + t * VEC - 1];     /* cell x-1 */
                const float east = row[PAD + t * VEC + VEC];   /* cell x+4 */
                if (x > 0)
                    o.x = stencil_point(c, mid.x, west, mid.y, north.x, south.x);
                o.y = stencil_point(c, mid.y, mid.x, mid.z, north.y, south.y);
                o.z = stencil_point(c, mid.z, mid.y, mid.w, north.z, south.z);
                if (x + VEC < nx)
                    o.w = stencil_point(c, mid.w, mid.z, east, north.w, south.w);
            }
            *reinterpret_cast<float4 *>(out + (size_t)y * nx + x) = o;
        }
    }
}

/* Cell (x, y) of the input, or 0 outside the grid. */
__device__ __forceinline__ float cell_or_zero(const float *__restrict__ in, int nx, int ny, int x,
                                              int y)
{
    return (x >= 0 && x < nx && y >= 0 && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
}

/* Fallback for nx % 4 != 0: a 32 x 8 output tile, one cell per thread, the
 * threads on the tile's rim also loading the halo next to them. */
__global__ void __launch_bounds__(TILE_X * TILE_Y)
stencil2d_tile_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      int y_first, stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_Y][IN_TILE_X];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = blockIdx.x * TILE_X + tx;
    const int y = y_first + blockIdx.y * TILE_Y + ty;
    const int r = ty + ORDER, s = tx + ORDER;         /* this cell's slot in the tile */

    tile[r][s] = cell_or_zero(in, nx, ny, x, y);
    if (tx == 0)
        tile[r][0] = cell_or_zero(in, nx, ny, x - 1, y);
    if (tx == TILE_X - 1)
        tile[r][IN_TILE_X - 1] = cell_or_zero(in, nx, ny, x + 1, y);
    if (ty == 0)
        tile[0][s] = cell_or_zero(in, nx, ny, x, y - 1);
    if (ty == TILE_Y - 1)
        tile[IN_TILE_Y - 1][s] = cell_or_zero(in, nx, ny, x, y + 1);
    __syncthreads();

    if (x >= nx || y >= ny)
        return;
    float v = tile[r][s];
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1)
        v = stencil_point(c, tile[r][s], tile[r][s - 1], tile[r][s + 1], tile[r - 1][s],
                          tile[r + 1][s]);
    out[(size_t)y * nx + x] = v;
}

/* One sweep in -> out, launched on `stream`.  gridDim.y is at most 65535: a
 * taller grid takes several launches. */
static void sweep(const float *in, float *out, int nx, int ny, stencil2d_coeffs c, bool vec4,
                  cudaStream_t stream)
{
    const int bx = vec4 ? (nx + STRIP - 1) / STRIP : (nx + TILE_X - 1) / TILE_X;
    const int rows_per_block = vec4 ? ROWS : TILE_Y;
    const int by = (ny + rows_per_block - 1) / rows_per_block;
    for (int b = 0; b < by; b += MAX_GRID_Y) {
        const dim3 grid(bx, by - b < MAX_GRID_Y ? by - b : MAX_GRID_Y);
        if (vec4)
            stencil2d_march_kernel<<<grid, THREADS, 0, stream>>>(in, out, nx, ny,
                                                                 b * rows_per_block, c);
        else
            stencil2d_tile_kernel<<<grid, dim3(TILE_X, TILE_Y), 0, stream>>>(
                in, out, nx, ny, b * rows_per_block, c);
    }
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    const bool vec4 = nx % VEC == 0 && (size_t)d_a % 16 == 0 && (size_t)d_b % 16 == 0;
    float *src = d_a, *dst = d_b;
    for (int s = 0; s < steps; s++) {
        sweep(src, dst, nx, ny, c, vec4, stream);    /* queued behind the previous step */
        float *tmp = src;                            /* this step's output is the next input */
        src = dst;
        dst = tmp;
    }
    return src;                                      /* d_a after an even number of steps */
}
