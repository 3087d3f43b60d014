/*
 * Lab 5 reference: the 3D 7-point Dirichlet sweep with thread coarsening
 * along z.  Each block owns an x-y tile and marches along z through a stack
 * of planes, keeping three input planes (prev, curr, next) in shared memory
 * and rotating them.
 *
 * What changed since the textbook's versions, and why
 * ---------------------------------------------------
 * The textbook's 3D shared tile (8 x 8 x 8 threads, one per input cell) has
 * a halo of 58 % and 1.37 OP/B.  Its z-coarsened kernel gives a 32 x 32
 * block a 30 x 30 output tile and marches it through 30 planes: 2.68 OP/B,
 * and only three planes of shared memory.  On an H100 both are slower than
 * the one-thread-per-cell kernel (the handout's table): L1 and L2 already
 * catch the reuse the tiles make explicit, and what is missing is bytes in
 * flight.  A thread of the textbook's z-march loads one 4-byte cell per
 * plane, then waits at two barriers, so each SM has a few KB in flight where
 * Little's law asks for more than ten.
 *
 * This kernel keeps the z-march and the three shared planes and changes how
 * each plane is loaded:
 *   - 16-byte loads on a wide tile.  A warp spans the tile's 128 columns,
 *     each lane loading four cells as one float4, so each load instruction of
 *     a warp moves 512 contiguous bytes, aligned, and the two x-halo columns
 *     are two cells per 128-cell row.  (The textbook's 32-wide input rows
 *     start one cell left of a line and straddle two.)
 *   - two rows per thread: the block is 32 x 8 threads over a 128 x 16
 *     output tile, each thread owning rows ty and ty + 8;
 *   - the next plane is loaded one plane ahead: while the block computes
 *     plane z, each thread's loads of plane z + 2 are already in flight, in
 *     registers; they are stored into shared memory at the start of the next
 *     step.  A thread thus has 2 x 16 B of body cells in flight during its
 *     whole step, eight times the textbook's 4 B;
 *   - the planes rotate by renaming three slot indices, not by copying, and
 *     one barrier per plane suffices (see below) where the textbook has two.
 * A block marches PLANES_PER_BLOCK = 32 planes and loads 34 (its own and the
 * two z-halo planes, none extra), so a 512^3 grid gives 4 x 32 x 16 = 2048
 * blocks, several waves on any GPU.  (The H200's tuning table marches 128
 * planes: 512 blocks, one wave at four blocks per SM, measured faster there.)
 *
 * The textbook's kernels are kept beside the references in reference/tour/
 * (naive_3d, book_shared_tile_t8, book_z_coarsening_t32); the handout's table
 * gives what `make tour` recorded for them and for this kernel, and
 * `make tune` records this kernel with one and two rows per thread and 16, 32
 * and 64 planes per block (labs/05-z-coarsening/tuning/).
 *
 * Preconditions
 * -------------
 *   blockDim = (BLOCK_X, BLOCK_Y) = (32, 8): 256 threads.
 *   Static shared memory: 3 planes x IN_TILE_Y x PLANE_X x 4 B
 *     = 3 x 18 x 136 x 4 = 29,376 bytes.
 *   Any nx, ny, nz >= 1.  The float4 path requires nx % 4 == 0 (then every
 *   row starts on a 16-byte boundary: cudaMalloc aligns the grid to 256 B);
 *   the launcher checks it and uses scalar loads and stores otherwise.
 *
 * Shared plane layout
 * -------------------
 *   planes[slot][r][s] holds cell (x0 - PAD_X + s, y0 - 1 + r) of the plane
 *   in that slot, where (x0, y0) is the tile's first output cell.  The body
 *   starts at s = PAD_X = 4 so that each lane's float4 lands on a 16-byte
 *   boundary; the left halo column is s = 3, the right one s = TILE_X + 4;
 *   slots 0..2 and TILE_X+5..TILE_X+7 are padding, never read.  Rows 0 and
 *   IN_TILE_Y - 1 are the y-halo rows.  Corners are not needed (a 7-point
 *   stencil has no diagonal neighbours) and not loaded.
 *
 * Per-thread contract
 * -------------------
 *   Thread (tx, ty) of block (bx, by, bz) owns columns x .. x+3 with
 *   x = bx * 128 + 4 * tx, rows y0 + ty + k * 8 (k = 0, 1) and planes
 *   zb .. ze-1, where zb = bz * 32 (plus the launch's z offset) and
 *   ze = min(zb + 32, nz).  For every plane zb-1 .. ze it loads those cells,
 *   plus at most one halo-row float4 (thread rows 0 and 7) and one halo-column
 *   cell (threads 0..31), into shared memory; for every plane zb .. ze-1 it
 *   writes its cells that lie inside the grid.
 *
 * Why every edge read is safe
 * ---------------------------
 *   Global loads happen only for cells inside the grid: each is guarded by
 *   z < nz, y < ny, x < nx (the float4 path: nx % 4 == 0, so x < nx implies
 *   x + 3 < nx) and the halo ones by x0 >= 1, x0 + 128 < nx, y0 >= 1,
 *   y0 + 16 < ny, z >= 0.  A slot whose cell is outside the grid, or whose
 *   plane this block does not need, is stored as 0; it is never read by a
 *   cell that uses it, because a boundary cell (any coordinate 0 or n-1) is
 *   copied from its own slot and an interior cell's six neighbours are all
 *   inside the grid, so their slots were loaded.
 *
 * Why one barrier per plane is enough
 * -----------------------------------
 *   Step z stores plane z + 1 into the slot of plane z - 2, then waits at the
 *   barrier, then computes plane z.  Other threads' cells are read only in
 *   curr (the x and y neighbours); prev and next are read only at the
 *   thread's own cells, which it stored itself.  The slot step z overwrites
 *   was last read by other threads in step z - 2, as curr; every thread has
 *   passed step z - 1's barrier since, so no thread still reads it.  And the
 *   curr read in step z was stored in step z - 1, before that step's barrier.
 *   (That z neighbours never leave their thread is what lab 6 builds on.)
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* Tunable (make tune, labs/05-z-coarsening/tune.json): -DTUNE_<NAME>=<value> replaces a default. */
#ifndef TUNE_ROWS_PER_THREAD
#define TUNE_ROWS_PER_THREAD 2
#endif
#ifndef TUNE_PLANES_PER_BLOCK
#define TUNE_PLANES_PER_BLOCK 32
#endif

constexpr int ORDER = 1;                                 /* neighbours on each side */
constexpr int VEC = 4;                                   /* cells per float4 */
constexpr int BLOCK_X = 32;                              /* blockDim.x: one warp across the tile */
constexpr int BLOCK_Y = 8;                               /* blockDim.y */
constexpr int ROWS_PER_THREAD = TUNE_ROWS_PER_THREAD;    /* thread coarsening in y */
constexpr int PLANES_PER_BLOCK = TUNE_PLANES_PER_BLOCK;  /* thread coarsening in z */
constexpr int TILE_X = BLOCK_X * VEC;                    /* 128 output columns per block */
constexpr int TILE_Y = BLOCK_Y * ROWS_PER_THREAD;        /* 16 output rows per block */
constexpr int PAD_X = VEC;                               /* keeps the body 16-byte aligned */
constexpr int PLANE_X = TILE_X + 2 * PAD_X;              /* 136 floats per shared row */
constexpr int IN_TILE_Y = TILE_Y + 2 * ORDER;            /* 18 rows: IN_TILE = OUT_TILE + 2 */
constexpr int THREADS = BLOCK_X * BLOCK_Y;               /* 256 */
constexpr int MIN_BLOCKS_PER_SM = 4;                     /* occupancy asked of ptxas: at most 64 registers */
constexpr int MAX_GRID_YZ = 65535;                       /* CUDA's limit on gridDim.y and gridDim.z */

static_assert(ORDER == 1, "the halo loads below fetch one row, column and plane on each side");
static_assert(PAD_X >= ORDER && PAD_X % VEC == 0, "the halo column fits in the padding, body aligned");
static_assert(BLOCK_Y >= 2, "the top and bottom halo rows are loaded by different thread rows");
static_assert(2 * TILE_Y <= THREADS, "one thread per halo-column cell");
static_assert(3 * IN_TILE_Y * PLANE_X * sizeof(float) <= 48 * 1024,
              "a statically sized __shared__ array is limited to 48 KB per block");

/* One thread's share of one input plane, held in registers between its global
 * loads and its store into shared memory. */
struct plane_regs {
    float4 body[ROWS_PER_THREAD];   /* columns x..x+3 of the thread's rows */
    float4 halo_row;                /* thread row 0: the row above the tile; the last: the row below */
    float halo_col;                 /* threads 0..2*TILE_Y-1: a cell of the left or right halo column */
};

/* What one thread loads from every plane; fixed for the whole march.  A
 * coordinate of -1 means "nothing to load" (outside the grid or not needed). */
struct thread_cells {
    int x;                          /* first of the thread's four columns */
    int y[ROWS_PER_THREAD];         /* its rows */
    int halo_row_y;                 /* the halo row it loads, or -1 */
    int halo_col_x, halo_col_y;     /* the halo-column cell it loads, or -1 */
};

/* Cells x..x+3 of a row; cells at or past nx read as 0 (never used).
 * ALIGNED: nx % 4 == 0, so the row and x are 16-byte aligned and x < nx
 * implies x + 3 < nx: one 16-byte load. */
template <bool ALIGNED>
__device__ __forceinline__ float4 load4(const float *__restrict__ row, int x, int nx)
{
    if (ALIGNED)
        return x < nx ? *reinterpret_cast<const float4 *>(row + x) : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v;
    v.x = x < nx ? row[x] : 0.f;
    v.y = x + 1 < nx ? row[x + 1] : 0.f;
    v.z = x + 2 < nx ? row[x + 2] : 0.f;
    v.w = x + 3 < nx ? row[x + 3] : 0.f;
    return v;
}

/* Stores the cells of v that lie inside the row (x < nx is checked by the caller). */
template <bool ALIGNED>
__device__ __forceinline__ void store4(float *__restrict__ row, int x, int nx, float4 v)
{
    if (ALIGNED) {
        *reinterpret_cast<float4 *>(row + x) = v;
        return;
    }
    row[x] = v.x;
    if (x + 1 < nx) row[x + 1] = v.y;
    if (x + 2 < nx) row[x + 2] = v.z;
    if (x + 3 < nx) row[x + 3] = v.w;
}

/* Issues the thread's global loads of plane z.  wanted: the plane is inside
 * the grid and this block needs it; otherwise nothing is read and every
 * register gets 0.  Returns at once: the loads complete in the background
 * until the registers are first used (by store_plane). */
template <bool ALIGNED>
__device__ __forceinline__ void load_plane(plane_regs &r, const float *__restrict__ in, int z,
                                           bool wanted, const thread_cells &t, int nx, int ny)
{
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    const float *plane = in + (size_t)(wanted ? z : 0) * nx * ny;
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++)
        r.body[k] = (wanted && t.y[k] >= 0) ? load4<ALIGNED>(plane + (size_t)t.y[k] * nx, t.x, nx) : zero;
    r.halo_row = (wanted && t.halo_row_y >= 0)
               ? load4<ALIGNED>(plane + (size_t)t.halo_row_y * nx, t.x, nx) : zero;
    r.halo_col = (wanted && t.halo_col_x >= 0) ? plane[(size_t)t.halo_col_y * nx + t.halo_col_x] : 0.f;
}

/* Stores the thread's share of a plane into one shared slot (layout above). */
__device__ __forceinline__ void store_plane(float (*slot)[PLANE_X], const plane_regs &r)
{
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BLOCK_X + tx;
    const int s = PAD_X + VEC * tx;
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++)
        *reinterpret_cast<float4 *>(&slot[ORDER + ty + k * BLOCK_Y][s]) = r.body[k];
    if (ty == 0)
        *reinterpret_cast<float4 *>(&slot[0][s]) = r.halo_row;
    if (ty == BLOCK_Y - 1)
        *reinterpret_cast<float4 *>(&slot[IN_TILE_Y - 1][s]) = r.halo_row;
    if (tid < TILE_Y)
        slot[ORDER + tid][PAD_X - 1] = r.halo_col;                 /* left halo column */
    else if (tid < 2 * TILE_Y)
        slot[ORDER + tid - TILE_Y][PAD_X + TILE_X] = r.halo_col;   /* right halo column */
}

template <bool ALIGNED>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
stencil3d_zmarch_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                        int y_first, int z_first, stencil3d_coeffs c)
{
    __shared__ __align__(16) float planes[3][IN_TILE_Y][PLANE_X];

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BLOCK_X + tx;
    const int x0 = blockIdx.x * TILE_X;                          /* the tile's first output column */
    const int y0 = y_first + blockIdx.y * TILE_Y;                /* its first output row */
    const int zb = z_first + blockIdx.z * PLANES_PER_BLOCK;      /* its first output plane */
    const int ze = min(zb + PLANES_PER_BLOCK, nz);               /* one past its last */

    thread_cells t;
    t.x = x0 + VEC * tx;
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; k++) {
        const int y = y0 + ty + k * BLOCK_Y;
        t.y[k] = y < ny ? y : -1;
    }
    t.halo_row_y = -1;
    if (ty == 0 && y0 >= 1)
        t.halo_row_y = y0 - 1;
    if (ty == BLOCK_Y - 1 && y0 + TILE_Y < ny)
        t.halo_row_y = y0 + TILE_Y;
    t.halo_col_x = t.halo_col_y = -1;
    if (tid < 2 * TILE_Y) {
        const int hx = tid < TILE_Y ? x0 - 1 : x0 + TILE_X;
        const int hy = y0 + (tid < TILE_Y ? tid : tid - TILE_Y);
        if (hx >= 0 && hx < nx && hy < ny) {
            t.halo_col_x = hx;
            t.halo_col_y = hy;
        }
    }
    /* The planes this block needs: zb-1 .. ze (its z halo), clipped to the grid. */
    auto wanted = [&](int z) { return z >= 0 && z < nz && z <= ze; };

    /* Prologue: planes zb-1 (prev) and zb (curr) into slots 0 and 1; plane
     * zb+1 into registers, to be stored as next in the first step. */
    plane_regs a, b, ahead;
    load_plane<ALIGNED>(a, in, zb - 1, wanted(zb - 1), t, nx, ny);
    load_plane<ALIGNED>(b, in, zb, wanted(zb), t, nx, ny);
    load_plane<ALIGNED>(ahead, in, zb + 1, wanted(zb + 1), t, nx, ny);
    store_plane(planes[0], a);
    store_plane(planes[1], b);
    int prev = 0, curr = 1, next = 2;                             /* slot of plane z-1, z, z+1 */

    const int s = PAD_X + VEC * tx;                               /* shared column of x */
#pragma unroll 1
    for (int z = zb; z < ze; z++) {
        /* 1. Plane z+1 (loaded one step ago) into the next slot, and the loads
         *    of plane z+2 issued now: they fly while this step waits and computes. */
        store_plane(planes[next], ahead);
        load_plane<ALIGNED>(ahead, in, z + 2, wanted(z + 2), t, nx, ny);

        /* 2. Wait until every thread has stored plane z+1: the halo cells and
         *    the rows of other warps that step 3 reads were stored by them. */
        __syncthreads();

        /* 3. Compute and store this thread's cells of plane z. */
        if (t.x < nx) {
            const bool z_inner = z > 0 && z < nz - 1;
            float *out_plane = out + (size_t)z * nx * ny;
#pragma unroll
            for (int k = 0; k < ROWS_PER_THREAD; k++) {
                const int y = t.y[k];
                if (y < 0)
                    break;
                const int r = ORDER + ty + k * BLOCK_Y;           /* shared row of y */
                const float *cr = planes[curr][r];
                const float4 ctr = *reinterpret_cast<const float4 *>(cr + s);
                const float4 ym = *reinterpret_cast<const float4 *>(planes[curr][r - 1] + s);
                const float4 yp = *reinterpret_cast<const float4 *>(planes[curr][r + 1] + s);
                const float4 zm = *reinterpret_cast<const float4 *>(planes[prev][r] + s);
                const float4 zp = *reinterpret_cast<const float4 *>(planes[next][r] + s);
                const float left = cr[s - 1], right = cr[s + VEC];   /* x neighbours of the ends */
                const bool yz_inner = z_inner && y > 0 && y < ny - 1;
                const int x = t.x;
                /* Interior cells: the formula of stencil_lab.h, in its order.
                 * Boundary cells: the centre, copied bit for bit. */
                float4 v;
                v.x = (yz_inner && x > 0 && x < nx - 1)
                    ? c.c0 * ctr.x + c.xm * left + c.xp * ctr.y + c.ym * ym.x + c.yp * yp.x
                      + c.zm * zm.x + c.zp * zp.x : ctr.x;
                v.y = (yz_inner && x + 1 < nx - 1)
                    ? c.c0 * ctr.y + c.xm * ctr.x + c.xp * ctr.z + c.ym * ym.y + c.yp * yp.y
                      + c.zm * zm.y + c.zp * zp.y : ctr.y;
                v.z = (yz_inner && x + 2 < nx - 1)
                    ? c.c0 * ctr.z + c.xm * ctr.y + c.xp * ctr.w + c.ym * ym.z + c.yp * yp.z
                      + c.zm * zm.z + c.zp * zp.z : ctr.z;
                v.w = (yz_inner && x + 3 < nx - 1)
                    ? c.c0 * ctr.w + c.xm * ctr.z + c.xp * right + c.ym * ym.w + c.yp * yp.w
                      + c.zm * zm.w + c.zp * zp.w : ctr.w;
                store4<ALIGNED>(out_plane + (size_t)y * nx, x, nx, v);
            }
        }

        /* 4. Rotate: plane z becomes prev, z+1 curr, and the old prev slot
         *    (plane z-1, no longer needed) receives plane z+2 in the next step. */
        const int recycled = prev;
        prev = curr;
        curr = next;
        next = recycled;
    }
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    const dim3 block(BLOCK_X, BLOCK_Y);
    const int tiles_x = (nx + TILE_X - 1) / TILE_X;
    const int tiles_y = (ny + TILE_Y - 1) / TILE_Y;
    const int stacks_z = (nz + PLANES_PER_BLOCK - 1) / PLANES_PER_BLOCK;
    const bool aligned = nx % VEC == 0;
    /* gridDim.y and gridDim.z are at most 65535: a taller or deeper grid takes
     * several launches, each told where its first tile and plane are. */
    for (int ty = 0; ty < tiles_y; ty += MAX_GRID_YZ) {
        for (int tz = 0; tz < stacks_z; tz += MAX_GRID_YZ) {
            const dim3 grid(tiles_x, tiles_y - ty < MAX_GRID_YZ ? tiles_y - ty : MAX_GRID_YZ,
                            stacks_z - tz < MAX_GRID_YZ ? stacks_z - tz : MAX_GRID_YZ);
            if (aligned)
                stencil3d_zmarch_kernel<true><<<grid, block, 0, stream>>>(
                    d_in, d_out, nx, ny, nz, ty * TILE_Y, tz * PLANES_PER_BLOCK, c);
            else
                stencil3d_zmarch_kernel<false><<<grid, block, 0, stream>>>(
                    d_in, d_out, nx, ny, nz, ty * TILE_Y, tz * PLANES_PER_BLOCK, c);
        }
    }
}
