/*
 * Lab 5: the 3D 7-point sweep with thread coarsening along z.   <- the one file you edit
 *
 * The problem (stencil3d_sweep in stencil_lab.h), cell (x, y, z) at index
 * (z * ny + y) * nx + x:
 *   interior cells (0 < x < nx-1, 0 < y < ny-1 and 0 < z < nz-1):
 *     out = c0*in[z][y][x] + xm*in[z][y][x-1] + xp*in[z][y][x+1]
 *                          + ym*in[z][y-1][x] + yp*in[z][y+1][x]
 *                          + zm*in[z-1][y][x] + zp*in[z+1][y][x]
 *   boundary cells (any coordinate 0 or n-1): out = in, bit for bit.
 *
 * Each block owns an x-y tile of the output and marches along z through a
 * stack of PLANES_PER_BLOCK planes, keeping three input planes (prev = z-1,
 * curr = z, next = z+1) in shared memory and rotating them after each plane.
 * The grader checks that your kernel uses shared memory.  The textbook's
 * version of this kernel (a 32 x 32 block, one 4-byte load per thread and
 * plane) is slower than one thread per cell on a recent GPU; to beat it you
 * need more bytes in flight per thread (read the handout).  The suggested
 * tile below is the one the handout discusses: 128 x 16 cells, a float4 of
 * four cells per thread and row, two rows per thread.
 *
 * Until you write the kernel it stores nothing: the harness fills the output
 * with NaN before each launch, so every cell fails the comparison.
 *
 * Build and grade:  cd labs/05-z-coarsening && make check
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* A suggested tile; change it if you like: the launcher follows these constants. */
constexpr int ORDER = 1;                                 /* neighbours on each side */
constexpr int VEC = 4;                                   /* cells per thread and row (one float4) */
constexpr int BLOCK_X = 32;                              /* blockDim.x */
constexpr int BLOCK_Y = 8;                               /* blockDim.y */
constexpr int ROWS_PER_THREAD = 2;                       /* thread coarsening in y */
constexpr int PLANES_PER_BLOCK = 32;                     /* thread coarsening in z */
constexpr int TILE_X = BLOCK_X * VEC;                    /* output columns per block */
constexpr int TILE_Y = BLOCK_Y * ROWS_PER_THREAD;        /* output rows per block */
constexpr int PAD_X = VEC;                               /* a float4 of padding each side keeps rows aligned */
constexpr int PLANE_X = TILE_X + 2 * PAD_X;              /* floats per shared row */
constexpr int IN_TILE_Y = TILE_Y + 2 * ORDER;            /* rows per shared plane, with the y halo */
constexpr int MAX_GRID_YZ = 65535;                       /* CUDA's limit on gridDim.y and gridDim.z */

static_assert(3 * IN_TILE_Y * PLANE_X * sizeof(float) <= 48 * 1024,
              "a statically sized __shared__ array is limited to 48 KB per block");

/* ALIGNED is true when nx % 4 == 0: every row then starts on a 16-byte
 * boundary and a float4 load or store of cells x..x+3 (x % 4 == 0, x < nx)
 * is legal.  When it is false, use 4-byte loads and stores. */
template <bool ALIGNED>
__global__ void stencil3d_zmarch_kernel(const float *__restrict__ in, float *__restrict__ out,
                                        int nx, int ny, int nz, int y_first, int z_first,
                                        stencil3d_coeffs c)
{
    // TODO(lab05): march this block's tile along z with three planes in shared memory.
    //   Block (bx, by, bz) owns the output columns x0 .. x0+TILE_X-1, rows y0 .. y0+TILE_Y-1
    //   and planes zb .. ze-1, with x0 = bx * TILE_X, y0 = y_first + by * TILE_Y,
    //   zb = z_first + bz * PLANES_PER_BLOCK and ze = min(zb + PLANES_PER_BLOCK, nz).
    //   1. Declare the planes:  __shared__ __align__(16) float planes[3][IN_TILE_Y][PLANE_X];
    //      planes[slot][r][s] holds cell (x0 - PAD_X + s, y0 - ORDER + r) of one input plane.
    //      Keep three slot indices prev, curr, next (planes z-1, z, z+1).
    //   2. Before the loop, load planes zb-1 and zb into two slots.  A thread (tx, ty) loads
    //      columns x0 + VEC*tx .. +3 of rows y0 + ty + k*BLOCK_Y; some threads also load the
    //      halo: the rows above and below the tile, the columns left and right of it.  Never
    //      read a cell outside the grid, nor a plane outside 0 .. nz-1.
    //   3. For z = zb .. ze-1: load plane z+1 into the next slot; __syncthreads() (the x and
    //      y neighbours you read were stored by other threads); compute and store your cells
    //      of plane z (boundary cells copied from the centre); rotate the three slot indices.
    //      Work out whether a second barrier is needed before the next plane is stored.
    //   4. Then make it fast: issue the loads of plane z+2 into registers before the barrier
    //      of step z, and store them into shared memory at the start of step z+1, so each
    //      thread has its loads in flight while the block waits and computes.
    //   Write down, for each shared slot you read, why it was loaded.
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    /* One block of BLOCK_X x BLOCK_Y threads per tile and stack of planes.  gridDim.y and
     * gridDim.z are at most 65535, so a taller or deeper grid takes several launches. */
    const dim3 block(BLOCK_X, BLOCK_Y);
    const int tiles_x = (nx + TILE_X - 1) / TILE_X;
    const int tiles_y = (ny + TILE_Y - 1) / TILE_Y;
    const int stacks_z = (nz + PLANES_PER_BLOCK - 1) / PLANES_PER_BLOCK;
    const bool aligned = nx % VEC == 0;
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
