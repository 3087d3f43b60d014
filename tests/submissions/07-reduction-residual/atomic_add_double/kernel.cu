/* Known-bad (atomic_add_double): the same per-thread sums and in-warp shuffle
 * tree as good_two_kernels, but the warps' sums are combined with
 * atomicAdd on the double *d_result (zeroed first with cudaMemsetAsync).
 * The values are right to the grader's tolerance, every time; their bits
 * are not the same every time: the atomics add the 8192 warps' sums in the
 * order in which the warps happen to get there, and floating-point addition
 * is not associative, so the rounding, and the last bits, change from run
 * to run.  The determinism cases run it 10 times on the same inputs and
 * compare all 64 bits. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { THREADS = 256, GRID = 1024, BX = 32, BY = 8, MAX_GRID_Y = 65535 };

__global__ void residual_kernel(const float *u, const float *f, int nx, int ny, double inv_h2,
                                double *result)
{
    const long long iw = nx - 2, cells = iw > 0 && ny > 2 ? iw * (ny - 2) : 0;
    double acc = 0.0;
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < cells;
         i += (long long)GRID * THREADS) {
        const long long x = 1 + i % iw, y = 1 + i / iw, c = y * nx + x;
        const double lap = (((double)u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx]) - 4.0 * u[c]) * inv_h2;
        const double r = f[c] - lap;
        acc = fma(r, r, acc);
    }
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (threadIdx.x % 32 == 0)
        atomicAdd(result, acc);                        /* BUG: the order of these additions varies */
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
    cudaMemsetAsync(d_result, 0, sizeof(double), stream);
    residual_kernel<<<GRID, THREADS, 0, stream>>>(d_u, d_f, nx, ny, 1.0 / ((double)h * h), d_result);
}

extern "C" void jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx, int ny,
                             float h, cudaStream_t stream)
{
    const int gx = (nx + BX - 1) / BX, gy = (ny + BY - 1) / BY;
    for (int b = 0; b < gy; b += MAX_GRID_Y)
        jacobi_kernel<<<dim3(gx, gy - b < MAX_GRID_Y ? gy - b : MAX_GRID_Y), dim3(BX, BY), 0, stream>>>(
            d_u, d_unew, d_f, nx, ny, h * h, b * BY);
}
