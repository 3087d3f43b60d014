/*
 * Known submission (lab 6): register tiling as the textbook writes it, T = 32.
 * Expected verdict: correct (every case passes; its speed is not the point).
 *
 * The textbook's kernel (its Fig. 8.12, thread coarsening along z plus register
 * tiling), rewritten for this kit's API: one block of 32 x 32 threads per
 * 32 x 32 input tile of an x-y plane, i.e. a 30 x 30 output tile; the block
 * marches through OUT_TILE = 30 planes along z.  Each thread keeps its column's
 * three z values (z-1, z, z+1) in registers; only the current plane sits in
 * shared memory, for the x-y neighbours: 32 * 32 * 4 = 4096 bytes per block,
 * a third of the three planes of lab 5's textbook kernel.
 *
 * What this file changes from the book, and only that:
 *   - the grid is any nx x ny x nz (the book uses a cube) and boundary cells are
 *     copied (the book writes only the interior);
 *   - the launcher splits the grid into several launches when it needs more than
 *     65535 blocks along y or z;
 *   - __launch_bounds__(1024), which lab 6's plane check reads.
 * Threads map onto the input tile (the first mapping of lab 2): the 124 rim
 * threads of the 1024 only load.  Each thread has one 4-byte load in flight per
 * plane, which is why this kernel, like lab 5's textbook kernels, stays far
 * below the copy bandwidth on an H100 (`make tour` prints the kit's figure;
 * lab 6's handout quotes the recorded one).
 *
 * tests/submissions/06-register-tiling/expected.json holds its verdict; lab 5's
 * tour times it from this path.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int IN_TILE = 32;                 /* input tile edge = blockDim.x = blockDim.y */
constexpr int OUT_TILE = IN_TILE - 2;       /* 30: output cells per tile edge, and planes per block */
constexpr int MAX_GRID_YZ = 65535;          /* CUDA's limit on gridDim.y and gridDim.z */

__global__ void __launch_bounds__(IN_TILE * IN_TILE)
book_register_tiling(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                     int tile_y_first, int tile_z_first, stencil3d_coeffs c)
{
    __shared__ float curr_s[IN_TILE][IN_TILE];     /* the current plane of the input tile */

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int z_start = (tile_z_first + blockIdx.z) * OUT_TILE;
    const int y = (tile_y_first + blockIdx.y) * OUT_TILE + ty - 1;
    const int x = blockIdx.x * OUT_TILE + tx - 1;
    const bool in_plane = x >= 0 && x < nx && y >= 0 && y < ny;
    const size_t plane = (size_t)nx * ny;
    const size_t col = in_plane ? (size_t)y * nx + x : 0;   /* this thread's column */

    /* z-1 and z of the first plane in registers; z in shared memory too. */
    float in_prev = 0.0f, in_curr = 0.0f, in_next = 0.0f;
    if (in_plane && z_start >= 1)
        in_prev = in[(size_t)(z_start - 1) * plane + col];
    if (in_plane)
        in_curr = in[(size_t)z_start * plane + col];
    curr_s[ty][tx] = in_curr;

    const int z_end = min(z_start + OUT_TILE, nz);          /* the same for the whole block */
    const bool owns_output = tx >= 1 && tx <= IN_TILE - 2 && ty >= 1 && ty <= IN_TILE - 2;
    for (int z = z_start; z < z_end; z++) {
        in_next = (in_plane && z + 1 < nz) ? in[(size_t)(z + 1) * plane + col] : 0.0f;
        __syncthreads();                                    /* the plane is in shared memory */
        if (owns_output && in_plane) {
            float v = in_curr;                              /* boundary cells: copied */
            if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && z > 0 && z < nz - 1)
                v = c.c0 * in_curr
                  + c.xm * curr_s[ty][tx - 1] + c.xp * curr_s[ty][tx + 1]
                  + c.ym * curr_s[ty - 1][tx] + c.yp * curr_s[ty + 1][tx]
                  + c.zm * in_prev + c.zp * in_next;
            out[(size_t)z * plane + col] = v;
        }
        __syncthreads();                                    /* everyone is done with this plane */
        in_prev = in_curr;                                  /* move the window one plane up */
        in_curr = in_next;
        curr_s[ty][tx] = in_next;
    }
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    const dim3 block(IN_TILE, IN_TILE);
    const int tiles_x = (nx + OUT_TILE - 1) / OUT_TILE;
    const int tiles_y = (ny + OUT_TILE - 1) / OUT_TILE;
    const int tiles_z = (nz + OUT_TILE - 1) / OUT_TILE;
    for (int ty = 0; ty < tiles_y; ty += MAX_GRID_YZ) {
        const int gy = tiles_y - ty < MAX_GRID_YZ ? tiles_y - ty : MAX_GRID_YZ;
        for (int tz = 0; tz < tiles_z; tz += MAX_GRID_YZ) {
            const int gz = tiles_z - tz < MAX_GRID_YZ ? tiles_z - tz : MAX_GRID_YZ;
            book_register_tiling<<<dim3(tiles_x, gy, gz), block, 0, stream>>>(d_in, d_out, nx, ny, nz,
                                                                             ty, tz, c);
        }
    }
}
