/*
 * Known submission (lab 6): three planes of shared memory, as in lab 5.
 * Expected verdict: constraint (correct, but breaks lab 6's plane limit).
 *
 * The reference's tile, threads and launcher, but the z neighbours are read
 * from shared memory: the block keeps planes z-1, z and z+1 in three shared
 * slots and rotates them by index, the design of lab 5.  Every case passes;
 * the launch audit's plane check fails it, because it uses
 * 3 x 16 x 136 x 4 = 26112 bytes of shared memory per block where one plane
 * of its 128 x 14 tile allows about 12400 (grader/stencil_grader/grading/
 * launches.py).  The audit runs in the bench, so the verdict needs a GPU.
 * three_planes_declared_1024 is kept as a patch against this file.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "stencil_lab.h"

constexpr int BLOCK_X = 32;               /* threads along x: one warp per row */
constexpr int OUT_ROWS = 14;              /* output rows per block */
constexpr int ROWS = OUT_ROWS + 2;        /* thread rows: plus one y-halo row above and below */
constexpr int THREADS = BLOCK_X * ROWS;   /* 512 */
constexpr int MAX_GRID_Y = 65535;         /* CUDA's limit on gridDim.y (and gridDim.z) */

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
__global__ void __launch_bounds__(THREADS, 2)
stencil3d_regtile_kernel(const float *__restrict__ in, float *__restrict__ out,
                         int nx, int ny, int nz, int tile_y_first, int z_len, stencil3d_coeffs c)
{
    constexpr int TILE_X = VEC * BLOCK_X;
    constexpr int PAD = VEC;
    constexpr int PITCH = TILE_X + 2 * PAD;
    /* Lab 5's layout: planes z-1, z and z+1 of the tile, in slots z % 3. */
    __shared__ __align__(16) float planes[3][ROWS][PITCH];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_X;
    const int x = x0 + VEC * tx;
    const int y = (tile_y_first + blockIdx.y) * OUT_ROWS - 1 + ty;
    const int zb = blockIdx.z * z_len;
    const int ze = min(zb + z_len, nz);
    const int z_last_load = min(ze, nz - 1);

    const bool row_in_grid = y >= 0 && y < ny;
    const bool in_grid = row_in_grid && x < nx;
    const bool computes = ty >= 1 && ty <= OUT_ROWS && in_grid;
    const int halo_x = tx == 0 ? x0 - 1 : x0 + TILE_X;
    const bool loads_halo = (tx == 0 || tx == BLOCK_X - 1) && ty >= 1 && ty <= OUT_ROWS
                            && row_in_grid && halo_x >= 0 && halo_x < nx;
    const size_t plane_cells = (size_t)nx * ny;
    const float *col = in + (in_grid ? (size_t)y * nx + x : 0);
    const float *halo_col = in + (loads_halo ? (size_t)y * nx + halo_x : 0);

    auto load = [&](Column<VEC> &d, int z) {
#pragma unroll
        for (int k = 0; k < VEC; k++)
            d.v[k] = 0.0f;
        d.halo = 0.0f;
        if (z >= 0 && z <= z_last_load) {
            if (in_grid)
                load_cells<VEC>(d.v, col + (size_t)z * plane_cells);
            if (loads_halo)
                d.halo = __ldg(halo_col + (size_t)z * plane_cells);
        }
    };
    /* Plane z of this thread's cells into its shared slot. */
    auto stage = [&](const Column<VEC> &d, int z) {
        float (*p)[PITCH] = planes[(z + 3) % 3];
        store_cells<VEC>(&p[ty][PAD + VEC * tx], d.v);
        if (ty >= 1 && ty <= OUT_ROWS) {
            if (tx == 0)
                p[ty][PAD - 1] = d.halo;
            if (tx == BLOCK_X - 1)
                p[ty][PAD + TILE_X] = d.halo;
        }
    };

    Column<VEC> next;
    load(next, zb - 1);
    stage(next, zb - 1);
    load(next, zb);
    stage(next, zb);
    load(next, zb + 1);
    const bool y_inner = y > 0 && y < ny - 1;
    for (int z = zb; z < ze; z++) {
        stage(next, z + 1);                           /* into the slot of plane z-2 */
        load(next, z + 2);
        __syncthreads();                              /* planes z-1, z, z+1 are in shared memory */
        if (computes) {
            const float (*below)[PITCH] = planes[(z + 2) % 3];
            const float (*cur)[PITCH] = planes[z % 3];
            const float (*above)[PITCH] = planes[(z + 1) % 3];
            const int s = PAD + VEC * tx;
            const bool yz_inner = y_inner && z > 0 && z < nz - 1;
            float res[VEC];
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                float v = cur[ty][s + k];
                if (yz_inner && x + k > 0 && x + k < nx - 1)
                    v = c.c0 * cur[ty][s + k] + c.xm * cur[ty][s + k - 1] + c.xp * cur[ty][s + k + 1]
                      + c.ym * cur[ty - 1][s + k] + c.yp * cur[ty + 1][s + k]
                      + c.zm * below[ty][s + k] + c.zp * above[ty][s + k];
                res[k] = v;
            }
            store_cells<VEC>(out + (size_t)z * plane_cells + (size_t)y * nx + x, res);
        }
        __syncthreads();                              /* the slot of plane z-1 is free again */
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
 * At most 65535 (gridDim.z). */
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
