/* Known-bad (boundary_counted): the two-kernel reduction of good_two_kernels,
 * but it sums r^2 over EVERY cell, the boundary ring included, taking the
 * neighbours that lie outside the grid as 0 (zero "ghost cells").  The
 * residual of a Dirichlet problem exists only at the interior cells, where
 * there is an equation; the boundary cells are given data.  The sum is too
 * large on every grid, and not 0 on grids with no interior at all. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { THREADS = 256, WARPS = THREADS / 32, GRID = 1024, BX = 32, BY = 8, MAX_GRID_Y = 65535 };

static __device__ double g_partials[GRID];

__device__ __forceinline__ double block_sum(double v)
{
    __shared__ double warp_sums[WARPS];
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < WARPS ? warp_sums[threadIdx.x] : 0.0;
    if (threadIdx.x < 32)
        for (int off = 16; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
    return v;                                          /* valid in thread 0 */
}

/* u at (x, y), or 0 outside the grid. */
__device__ __forceinline__ double at(const float *u, int nx, int ny, long long x, long long y)
{
    return x >= 0 && x < nx && y >= 0 && y < ny ? (double)u[y * nx + x] : 0.0;
}

__global__ void partial_kernel(const float *u, const float *f, int nx, int ny, double inv_h2)
{
    const long long cells = (long long)nx * ny;       /* BUG: every cell, not only the interior */
    double acc = 0.0;
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < cells;
         i += (long long)GRID * THREADS) {
        const long long x = i % nx, y = i / nx, c = y * nx + x;
        const double lap = ((at(u, nx, ny, x - 1, y) + at(u, nx, ny, x + 1, y) + at(u, nx, ny, x, y - 1)
                             + at(u, nx, ny, x, y + 1)) - 4.0 * u[c]) * inv_h2;
        const double r = f[c] - lap;
        acc = fma(r, r, acc);
    }
    const double s = block_sum(acc);
    if (threadIdx.x == 0)
        g_partials[blockIdx.x] = s;
}

__global__ void final_kernel(double *result)
{
    double v = 0.0;
    for (int i = threadIdx.x; i < GRID; i += THREADS)
        v += g_partials[i];
    const double s = block_sum(v);
    if (threadIdx.x == 0)
        *result = s;
}

__global__ void jacobi_kernel(const float *u, float *unew, const float *f, int nx, int ny, float h2,
                              int y_first)
{
    const int x = blockIdx.x * BX + threadIdx.x, y = y_first + blockIdx.y * BY + threadIdx.y;
    if (x >= nx || y >= ny)
        return;
    const size_t c = (size_t)y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
        unew[c] = u[c];
    else
        unew[c] = (((u[c - 1] + u[c + 1]) + u[c - nx]) + u[c + nx] - h2 * f[c]) * 0.25f;
}

extern "C" void residual_norm2(const float *d_u, const float *d_f, int nx, int ny, float h,
                               double *d_result, cudaStream_t stream)
{
    partial_kernel<<<GRID, THREADS, 0, stream>>>(d_u, d_f, nx, ny, 1.0 / ((double)h * h));
    final_kernel<<<1, THREADS, 0, stream>>>(d_result);   /* runs after partial_kernel: same stream */
}

extern "C" void jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx, int ny,
                             float h, cudaStream_t stream)
{
    const int gx = (nx + BX - 1) / BX, gy = (ny + BY - 1) / BY;
    for (int b = 0; b < gy; b += MAX_GRID_Y)
        jacobi_kernel<<<dim3(gx, gy - b < MAX_GRID_Y ? gy - b : MAX_GRID_Y), dim3(BX, BY), 0, stream>>>(
            d_u, d_unew, d_f, nx, ny, h * h, b * BY);
}
