/*
 * Lab 6 reference: the 3D 7-point Dirichlet sweep with register tiling.
 * Each block owns an x-y tile and marches along z; every thread keeps its
 * column's z neighbours in registers, and only the current plane is staged in
 * shared memory, where the x-y neighbours are read.
 *
 * What changed since lab 5, and why
 * ---------------------------------
 * Lab 5's kernel keeps three planes (z-1, z, z+1) of its tile in shared
 * memory.  Yet the planes z-1 and z+1 are read by one thread each: the cell
 * (x, y, z-1) is needed only by the thread that owns the column (x, y).  So they
 * can live in that thread's registers (the textbook's register tiling): the
 * thread loads its column one plane at a time and slides a window of
 * registers up the column.  Only the current plane is shared, because its
 * cells are the x-y neighbours of other threads.  Shared memory per block
 * drops to a third, and of the twelve shared-memory accesses per cell and
 * plane of the textbook's three-plane kernel, five remain.
 *
 * That alone does not make the sweep faster on an H100: the textbook's
 * register-tiled kernel (32 x 32 threads, one 4-byte load per thread and
 * plane; reference/tour/06-register-tiling/book_register_tiling_t32) is
 * still slower than one thread per cell (the handout's table), because what
 * limits it is the number of bytes each thread has in flight, not the
 * shared-memory traffic.
 * The registers freed from shared memory are what this kernel spends on
 * bytes in flight:
 *   - 16-byte loads: each thread owns four consecutive cells of a row, loaded
 *     and stored as one float4, so a warp moves one aligned 512-byte row
 *     segment per instruction;
 *   - several planes in flight: the register window is deeper than the three
 *     planes the stencil needs.  While the block computes plane z, each
 *     thread already has its loads of planes z+2 .. z+AHEAD+1 in flight
 *     (AHEAD = 3), issued AHEAD steps before their first use.  Per thread
 *     that is 4 x 16 = 64 bytes in flight, sixteen times the textbook's 4.
 * What each plane of loads ahead is worth is in `make tune`'s records
 * (AHEAD = 1, 2, 3 with 6, 14 and 30 output rows, labs/06-register-tiling/
 * tuning/) and the handout's table.  Two more lessons of the development
 * runs (the handout's development notes): the x-halo cells must be requested
 * as early as the body, or the whole block waits at the barrier for two
 * lanes; and a variant needing more than 64 registers per thread drops to
 * one block per SM, which costs more than any plane ahead gains.
 *
 * Two rows per thread (ROWS_PER_THREAD = 2, thread coarsening along y): the
 * block is half as tall, and thread (tx, ty) owns tile rows ty and ty + ROWS.
 * Then the y-halo rows are held by threads that also compute, so no warp
 * sits out the compute step, and each barrier serves twice the cells.  Its
 * register window is twice as wide, so only AHEAD = 1 fits in 64 registers.
 * On an H200 it measured faster than one row per thread with AHEAD = 3 (the
 * H200's tuning file, labs/06-register-tiling/tuning/nvidia-h200.json, and
 * the handout); the H100's file, measured before this option existed, keeps
 * one row per thread.
 *
 * Preconditions
 * -------------
 *   blockDim = (BLOCK_X, ROWS), ROWS = TILE_ROWS / ROWS_PER_THREAD, TILE_ROWS =
 *   OUT_ROWS + 2: (32, 16), 512 threads, by default; __launch_bounds__
 *   declares them and asks for registers enough for 1024 threads per SM (at
 *   most 64 per thread).  (Lab 6's plane check reads the block as launched,
 *   from the bench's launch audit, never from this declaration.)
 *   Static shared memory, one plane: TILE_ROWS x PITCH x 4 B, PITCH = TILE_X + 2 PAD:
 *     fast path (VEC = 4): 16 x 136 x 4 = 8704 bytes;
 *     fallback  (VEC = 1): 16 x  34 x 4 = 2176 bytes.
 *   Fast path: nx % 4 == 0 and both grids 16-byte aligned (cudaMalloc gives
 *   256), so every row starts on a 16-byte boundary; the launcher checks both
 *   and otherwise takes the fallback, the same kernel with 4-byte loads.
 *   Any nx, ny, nz >= 1.
 *
 * Per-thread contract
 * -------------------
 *   Block (bx, by, bz) owns output columns x0 .. x0 + TILE_X - 1 (x0 = bx *
 *   TILE_X, TILE_X = 32 VEC), output rows y0 .. y0 + OUT_ROWS - 1 (y0 = (the
 *   launch's first tile + by) * OUT_ROWS) and planes zb .. ze - 1 (zb = bz *
 *   z_len).  Thread (tx, ty) owns the VEC cells x = x0 + VEC tx .. x + VEC - 1
 *   of tile rows r = ty + j ROWS (j < ROWS_PER_THREAD), grid rows y = y0 - 1 + r.
 *   Tile rows 0 and TILE_ROWS - 1 are the y-halo rows: they are only loaded
 *   (their cells belong to the tiles above and below); rows 1 .. OUT_ROWS are
 *   also computed and stored.  Lanes 0 and 31 also load one x-halo cell per
 *   plane (x0 - 1, x0 + TILE_X) for each computing row they own.
 *   Every thread loads planes zb - 1 .. ze of its cells (those inside the
 *   grid), each once, and takes every barrier.
 *
 * Shared plane layout
 * -------------------
 *   plane[r][s] holds cell (x0 - PAD + s, y0 - 1 + r) of the current plane.
 *   PAD = VEC, so the body starts at a 16-byte boundary and each float4 store
 *   is aligned; the x-halo cells sit at s = PAD - 1 and s = PAD + TILE_X.
 *   Corners (x-halo cells of the halo rows) are never needed by a 7-point
 *   stencil and never loaded.
 *
 * Why every edge read is safe
 * ---------------------------
 *   Global loads happen only for cells inside the grid: a float4 when
 *   0 <= y < ny and x < nx (then x + 3 <= nx - 1, since nx % 4 == 0); an
 *   x-halo cell when its column is inside the grid; a plane only when
 *   0 <= z < nz.  Everything else is 0 in the registers and in the plane.
 *   Shared reads: only computing threads read, and only for interior cells
 *   do the values matter (boundary cells copy their own register).  An
 *   interior cell's four x-y neighbours are inside the grid, so their slots
 *   were stored this step: the left x-halo slot is read by lane 0 at x == x0,
 *   which is interior only when x0 >= 1; the right one by lane 31 at
 *   x + 3 == x0 + TILE_X - 1, interior only when x0 + TILE_X < nx; tile rows 0
 *   and TILE_ROWS - 1 are the y-halo rows, loaded whenever the row exists.
 *   Registers: the z-1 and z+1 neighbours are used only when 0 < z < nz - 1,
 *   where both planes exist and were loaded.
 *
 * Barriers: two per plane.  The first publishes the plane before anyone
 * reads it; the second keeps every thread from overwriting it (with the next
 * plane) while others still read.  Both are reached by every thread of the
 * block: the loop bounds depend only on the block.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "stencil_lab.h"

/* Tunable (make tune, labs/06-register-tiling/tune.json): -DTUNE_<NAME>=<value> replaces a default. */
#ifndef TUNE_OUT_ROWS
#define TUNE_OUT_ROWS 14
#endif
#ifndef TUNE_AHEAD
#define TUNE_AHEAD 3
#endif
#ifndef TUNE_ROWS_PER_THREAD
#define TUNE_ROWS_PER_THREAD 1
#endif

constexpr int BLOCK_X = 32;               /* threads along x: one warp per row */
constexpr int OUT_ROWS = TUNE_OUT_ROWS;   /* output rows per block */
constexpr int TILE_ROWS = OUT_ROWS + 2;   /* tile rows: plus one y-halo row above and below */
constexpr int RPT = TUNE_ROWS_PER_THREAD; /* tile rows per thread (thread coarsening along y) */
constexpr int ROWS = TILE_ROWS / RPT;     /* thread rows: blockDim.y */
constexpr int THREADS = BLOCK_X * ROWS;   /* 512 by default */
constexpr int MIN_BLOCKS = 1024 / THREADS;   /* registers sized for 1024 resident threads per SM: 64 each */
constexpr int AHEAD = TUNE_AHEAD;         /* planes in flight beyond z+1 */
constexpr int RING = AHEAD + 3;           /* planes held in registers: z-1 .. z+AHEAD+1 */
constexpr int MAX_GRID_Y = 65535;         /* CUDA's limit on gridDim.y (and gridDim.z) */
static_assert(TILE_ROWS % RPT == 0 && THREADS <= 1024, "the tile's rows must split evenly into thread rows");

/* One plane of one thread's column: its VEC cells, and its x-halo cell (lanes
 * 0 and 31 of the computing rows; 0 elsewhere). */
template <int VEC>
struct Column {
    float v[VEC];
    float halo;
};

/* Loads VEC consecutive floats; p is 16-byte aligned when VEC == 4. */
template <int VEC>
__device__ __forceinline__ void load_cells(float (&dst)[VEC], const float *p)
{
    if constexpr (VEC == 4) {
        const float4 t = __ldg(reinterpret_cast<const float4 *>(p));
        dst[0] = t.x; dst[1] = t.y; dst[2] = t.z; dst[3] = t.w;
    } else {
        dst[0] = __ldg(p);
    }
}

template <int VEC>
__device__ __forceinline__ void store_cells(float *p, const float (&src)[VEC])
{
    if constexpr (VEC == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(src[0], src[1], src[2], src[3]);
    else
        p[0] = src[0];
}

template <int VEC>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
stencil3d_regtile_kernel(const float *__restrict__ in, float *__restrict__ out,
                         int nx, int ny, int nz, int tile_y_first, int z_len, stencil3d_coeffs c)
{
    constexpr int TILE_X = VEC * BLOCK_X;          /* 128 or 32 cells */
    constexpr int PAD = VEC;                       /* body starts 16-byte aligned */
    constexpr int PITCH = TILE_X + 2 * PAD;
    __shared__ __align__(16) float plane[TILE_ROWS][PITCH];   /* the current plane, and only it */

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_X;
    const int x = x0 + VEC * tx;                               /* this thread's first cell */
    const int y_top = (tile_y_first + blockIdx.y) * OUT_ROWS - 1;   /* the grid row of tile row 0 */
    const int zb = blockIdx.z * z_len;                         /* planes zb .. ze-1 */
    const int ze = min(zb + z_len, nz);
    const int z_last_load = min(ze, nz - 1);                   /* the z+1 neighbour of ze-1, if any */
    const size_t plane_cells = (size_t)nx * ny;
    const int halo_x = tx == 0 ? x0 - 1 : x0 + TILE_X;         /* lanes 0 and 31 only */

    /* This thread's tile rows r = ty + j ROWS (j < RPT), each at grid row y[j]. */
    int y[RPT];
    bool in_grid[RPT], computes[RPT], loads_halo[RPT];
    const float *col[RPT], *halo_col[RPT];
#pragma unroll
    for (int j = 0; j < RPT; j++) {
        const int r = ty + j * ROWS;
        y[j] = y_top + r;
        const bool row_in_grid = y[j] >= 0 && y[j] < ny;
        const bool out_row = r >= 1 && r <= OUT_ROWS;
        in_grid[j] = row_in_grid && x < nx;                    /* whole vector inside (nx % VEC == 0) */
        computes[j] = out_row && in_grid[j];
        loads_halo[j] = (tx == 0 || tx == BLOCK_X - 1) && out_row && row_in_grid && halo_x >= 0 && halo_x < nx;
        col[j] = in + (in_grid[j] ? (size_t)y[j] * nx + x : 0);
        halo_col[j] = in + (loads_halo[j] ? (size_t)y[j] * nx + halo_x : 0);
    }

    /* Plane z of this thread's columns into d (zeros where nothing is loaded). */
    auto load = [&](Column<VEC> (&d)[RPT], int z) {
#pragma unroll
        for (int j = 0; j < RPT; j++) {
#pragma unroll
            for (int k = 0; k < VEC; k++)
                d[j].v[k] = 0.0f;
            d[j].halo = 0.0f;
            if (z >= 0 && z <= z_last_load) {
                if (in_grid[j])
                    load_cells<VEC>(d[j].v, col[j] + (size_t)z * plane_cells);
                if (loads_halo[j])
                    d[j].halo = __ldg(halo_col[j] + (size_t)z * plane_cells);
            }
        }
    };

    /* The register window: ring[(z - zb + 1) % RING] holds plane z.  Fill it
     * with planes zb-1 .. zb+AHEAD before the first step. */
    Column<VEC> ring[RING][RPT];
#pragma unroll
    for (int k = 0; k < AHEAD + 2; k++)
        load(ring[k], zb - 1 + k);

    /* The march, RING planes per outer iteration so that every ring index is
     * a compile-time constant (registers cannot be indexed at run time). */
    for (int z0 = zb; z0 < ze; z0 += RING) {
#pragma unroll
        for (int s = 0; s < RING; s++) {
            const int z = z0 + s;
            if (z >= ze)
                break;                                         /* the same for the whole block */
            const Column<VEC> (&below)[RPT] = ring[s % RING];         /* plane z-1 */
            const Column<VEC> (&cur)[RPT] = ring[(s + 1) % RING];     /* plane z */
            const Column<VEC> (&above)[RPT] = ring[(s + 2) % RING];   /* plane z+1 */

            /* 1. Stage plane z: body cells, and the x-halo cells of the computing rows. */
#pragma unroll
            for (int j = 0; j < RPT; j++) {
                const int r = ty + j * ROWS;
                store_cells<VEC>(&plane[r][PAD + VEC * tx], cur[j].v);
                if (r >= 1 && r <= OUT_ROWS) {
                    if (tx == 0)
                        plane[r][PAD - 1] = cur[j].halo;
                    if (tx == BLOCK_X - 1)
                        plane[r][PAD + TILE_X] = cur[j].halo;
                }
            }
            /* 2. Request plane z+AHEAD+1 into the slot of plane z-2, which no one
             *    needs any more, before waiting: it has AHEAD steps to arrive. */
            load(ring[(s + AHEAD + 2) % RING], z + AHEAD + 1);
            __syncthreads();                                   /* plane z is in shared memory */

            /* 3. Compute and store this thread's cells of plane z. */
            const bool z_inner = z > 0 && z < nz - 1;
#pragma unroll
            for (int j = 0; j < RPT; j++) {
                if (!computes[j])
                    continue;
                const int r = ty + j * ROWS;
                float up[VEC], down[VEC], res[VEC];
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    up[k] = plane[r - 1][PAD + VEC * tx + k];
                    down[k] = plane[r + 1][PAD + VEC * tx + k];
                }
                const float left = plane[r][PAD + VEC * tx - 1];
                const float right = plane[r][PAD + VEC * tx + VEC];
                const bool yz_inner = z_inner && y[j] > 0 && y[j] < ny - 1;
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    const float xm = k == 0 ? left : cur[j].v[k - 1];
                    const float xp = k == VEC - 1 ? right : cur[j].v[k + 1];
                    float v = cur[j].v[k];                     /* boundary cells: copied */
                    if (yz_inner && x + k > 0 && x + k < nx - 1)
                        v = c.c0 * cur[j].v[k] + c.xm * xm + c.xp * xp + c.ym * up[k] + c.yp * down[k]
                          + c.zm * below[j].v[k] + c.zp * above[j].v[k];
                    res[k] = v;
                }
                store_cells<VEC>(out + (size_t)z * plane_cells + (size_t)y[j] * nx + x, res);
            }
            __syncthreads();                                   /* everyone is done with plane z */
        }
    }
}

/* ------------------------------------------------------------------ launcher */

/* Blocks of stencil3d_regtile_kernel<VEC> resident on the whole GPU at once
 * (SMs x blocks per SM), asked once per device and remembered: the launcher
 * runs inside the timed region, so it should cost next to nothing. */
template <int VEC>
static int resident_blocks()
{
    static int known_device = -1, known_blocks = 0;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess)
        return 1;
    if (device == known_device)
        return known_blocks;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess
        || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stencil3d_regtile_kernel<VEC>,
                                                          THREADS, 0) != cudaSuccess)
        return 1;                                  /* the launch itself will report the error */
    known_device = device;
    known_blocks = sms * per_sm > 0 ? sms * per_sm : 1;
    return known_blocks;
}

/* How many stretches of planes (blocks along z) to cut each column into.
 * Blocks run in waves of `resident` at a time, and every block marches its
 * z_len planes plus the two z-halo planes it re-reads, so the sweep takes
 * about waves x (z_len + 2) plane-steps: choose the count that minimises it
 * (more stretches fill the GPU; longer ones re-read fewer halo planes).
 * At most 65535 (gridDim.z).  A block's speed is bounded by its own latency,
 * so a last wave that is nearly empty costs almost as much as a full one
 * (on the bench grid, 148 tiles and 264 resident blocks on an H100, the
 * count chosen is 7 stretches, 3.92 waves; the handout's development notes
 * give what 2 to 16 stretches measured).  The grid's order (x fastest, then
 * y, then the stretch) keeps the blocks that run at one time within a few
 * planes of each other, which measured faster than ordering the stretches
 * of a column next to each other. */
static int z_stretches(int nz, long long tiles, long long resident)
{
    long long best = 1, best_cost = -1;
    long long most = (resident + tiles - 1) / tiles * 8;   /* beyond 8 full waves nothing improves */
    if (most > nz) most = nz;
    if (most > 65535) most = 65535;
    for (long long n = 1; n <= most; n++) {
        const long long len = (nz + n - 1) / n;
        const long long count = (nz + len - 1) / len;
        const long long waves = (count * tiles + resident - 1) / resident;
        const long long cost = waves * (len + 2);
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = count;
        }
    }
    return (int)best;
}

template <int VEC>
static void launch(const float *d_in, float *d_out, int nx, int ny, int nz, stencil3d_coeffs c,
                   cudaStream_t stream)
{
    const int tiles_x = (nx + VEC * BLOCK_X - 1) / (VEC * BLOCK_X);
    const int tiles_y = (ny + OUT_ROWS - 1) / OUT_ROWS;
    const int first_launch = tiles_y < MAX_GRID_Y ? tiles_y : MAX_GRID_Y;
    const int stretches = z_stretches(nz, (long long)tiles_x * first_launch, resident_blocks<VEC>());
    const int z_len = (nz + stretches - 1) / stretches;
    const int blocks_z = (nz + z_len - 1) / z_len;
    /* gridDim.y is at most 65535: a taller grid takes several launches. */
    for (int t = 0; t < tiles_y; t += MAX_GRID_Y) {
        const int n = tiles_y - t < MAX_GRID_Y ? tiles_y - t : MAX_GRID_Y;
        stencil3d_regtile_kernel<VEC><<<dim3(tiles_x, n, blocks_z), dim3(BLOCK_X, ROWS), 0, stream>>>(
            d_in, d_out, nx, ny, nz, t, z_len, c);
    }
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    const bool aligned = ((uintptr_t)d_in % 16 == 0) && ((uintptr_t)d_out % 16 == 0);
    if (nx % 4 == 0 && aligned)
        launch<4>(d_in, d_out, nx, ny, nz, c, stream);
    else
        launch<1>(d_in, d_out, nx, ny, nz, c, stream);
}
