/*
 * Lab 6: the 3D 7-point sweep with register tiling.   <- the one file you edit
 *
 * Same problem as lab 5 (stencil3d_sweep in stencil_lab.h):
 *   interior cells (0 < x < nx-1, 0 < y < ny-1 and 0 < z < nz-1):
 *     out[z][y][x] = c0*in[z][y][x] + xm*in[z][y][x-1] + xp*in[z][y][x+1]
 *                                   + ym*in[z][y-1][x] + yp*in[z][y+1][x]
 *                                   + zm*in[z-1][y][x] + zp*in[z+1][y][x]
 *   boundary cells: out = in, bit for bit.
 *
 * Lab 5 kept three planes of the tile in shared memory.  Here each thread
 * keeps the z neighbours of its own cells (planes z-1 and z+1) in registers,
 * and the block stages only the current plane in shared memory, for the x-y
 * neighbours.  The grader checks it: at most one plane of shared memory per
 * block (the handout gives the formula; __launch_bounds__ below declares the
 * block size it needs).  To be fast, load 16 bytes at a time and keep several
 * planes of loads in flight per thread: read the handout.
 *
 * The suggested design, which the launcher below follows:
 *   - a block of BLOCK_X x ROWS = 32 x 16 threads owns a tile of TILE_X x
 *     OUT_ROWS cells of each plane, TILE_X = 4 * BLOCK_X = 128 when every row
 *     can be loaded as float4 (VEC = 4), 32 otherwise (VEC = 1);
 *   - thread (tx, ty) owns the VEC cells x = x0 + VEC*tx .. x + VEC-1 of row
 *     y = y0 - 1 + ty: thread rows 0 and ROWS-1 hold the y-halo rows and only
 *     load; rows 1 .. OUT_ROWS also compute;
 *   - the block marches through the planes zb .. zb + z_len - 1 (blockIdx.z
 *     picks the stretch; the launcher chooses z_len).
 *
 * Until you write the kernel it stores nothing: the harness fills the output
 * with NaN before each launch, so every case fails.
 *
 * Build and grade:  cd labs/06-register-tiling && make check
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "stencil_lab.h"

/* A suggested shape; change it if you like: the launcher follows these constants. */
constexpr int BLOCK_X = 32;               /* threads along x: one warp per row */
constexpr int OUT_ROWS = 14;              /* output rows per block */
constexpr int ROWS = OUT_ROWS + 2;        /* thread rows: plus one y-halo row above and below */
constexpr int THREADS = BLOCK_X * ROWS;   /* 512 */
constexpr int AHEAD = 3;                  /* planes of loads in flight beyond z+1 */
constexpr int MAX_GRID_Y = 65535;         /* CUDA's limit on gridDim.y (and gridDim.z) */

static_assert(AHEAD >= 0, "AHEAD counts the planes requested beyond z+1");

/* __launch_bounds__(THREADS, 2): at most THREADS threads per block (the plane
 * check reads this from the PTX), and registers for 2 blocks per SM. */
template <int VEC>
__global__ void __launch_bounds__(THREADS, 2)
stencil3d_regtile_kernel(const float *__restrict__ in, float *__restrict__ out,
                         int nx, int ny, int nz, int tile_y_first, int z_len, stencil3d_coeffs c)
{
    // TODO(lab06): march this block's tile through its planes, z neighbours in registers.
    //   Block (bx, by, bz): x0 = bx * VEC * BLOCK_X, y0 = (tile_y_first + by) * OUT_ROWS,
    //   planes zb = bz * z_len .. ze - 1, ze = min(zb + z_len, nz).
    //   1. Declare the one plane:  __shared__ __align__(16) float plane[ROWS][VEC * BLOCK_X + 2 * VEC];
    //      plane[r][s] holds cell (x0 - VEC + s, y0 - 1 + r): the body starts 16-byte
    //      aligned, the x-halo cells sit just left and right of it.
    //   2. Each thread keeps its cells of several planes in registers: z-1, z, z+1 and
    //      AHEAD more.  A register array can only be indexed by compile-time constants,
    //      so rotate the planes by unrolling the z loop (#pragma unroll) and computing the
    //      slot of plane z as a constant, not by copying registers.  Load with float4 when
    //      VEC == 4.  Never load a cell outside the grid (use 0 instead).
    //   3. For each plane z: store your cells of plane z (lanes 0 and 31 of the computing
    //      rows also the x-halo cells x0 - 1 and x0 + VEC * BLOCK_X), request plane
    //      z + AHEAD + 1, __syncthreads(), compute and store your cells (copy boundary
    //      cells), __syncthreads() again before the plane is overwritten.
    //   Every thread must reach every barrier: the loop bounds must be the same for the
    //   whole block.  Write down, for each neighbour you read, why it was loaded.
}

/* ------------------------------------------------------------------ launcher */

/* Blocks of the kernel resident on the whole GPU at once, asked once per device. */
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
        return 1;
    known_device = device;
    known_blocks = sms * per_sm > 0 ? sms * per_sm : 1;
    return known_blocks;
}

/* How many stretches of planes to cut each column of tiles into: blocks run in
 * waves of `resident`, each marching its planes plus two z-halo planes, so the
 * sweep takes about waves x (z_len + 2) plane-steps; take the count that
 * minimises that (at most 65535, gridDim.z's limit). */
static int z_stretches(int nz, long long tiles, long long resident)
{
    long long best = 1, best_cost = -1;
    long long most = (resident + tiles - 1) / tiles * 8;
    if (most > nz) most = nz;
    if (most > 65535) most = 65535;
    for (long long n = 1; n <= most; n++) {
        const long long len = (nz + n - 1) / n;
        const long long count = (nz + len - 1) / len;
        const long long cost = (count * tiles + resident - 1) / resident * (len + 2);
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
    /* float4 loads need every row to start on a 16-byte boundary. */
    const bool aligned = ((uintptr_t)d_in % 16 == 0) && ((uintptr_t)d_out % 16 == 0);
    if (nx % 4 == 0 && aligned)
        launch<4>(d_in, d_out, nx, ny, nz, c, stream);
    else
        launch<1>(d_in, d_out, nx, ny, nz, c, stream);
}
