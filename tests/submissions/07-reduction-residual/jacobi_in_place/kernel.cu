/* Known-bad (jacobi_in_place): the residual of good_two_kernels is right, but
 * the Jacobi sweep works in place: it first copies u into unew (a
 * device-to-device cudaMemcpyAsync, which is allowed), then each thread
 * walks down one column of unew, overwriting each cell with its update.  The
 * cell above was overwritten one step earlier, so every update after the
 * first interior row reads a NEW value for y-1: a Gauss-Seidel-like sweep,
 * not Jacobi.  Its cells differ from the CPU reference on every grid with
 * two or more interior rows (and the residual falls faster than cos(pi h)). */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { THREADS = 256, WARPS = THREADS / 32, GRID = 1024 };

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

__global__ void partial_kernel(const float *u, const float *f, int nx, int ny, double inv_h2)
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

/* One thread per column, marching down it and updating unew in place. */
__global__ void jacobi_kernel(float *unew, const float *f, int nx, int ny, float h2)
{
    const int x = blockIdx.x * THREADS + threadIdx.x;
    if (x <= 0 || x >= nx - 1)
        return;                                        /* boundary columns: already copied */
    for (int y = 1; y < ny - 1; y++) {
        const size_t c = (size_t)y * nx + x;
        /* BUG: unew[c - nx] was updated on the previous step of this loop */
        unew[c] = (((unew[c - 1] + unew[c + 1]) + unew[c - nx]) + unew[c + nx] - h2 * f[c]) * 0.25f;
    }
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
    cudaMemcpyAsync(d_unew, d_u, (size_t)nx * ny * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    jacobi_kernel<<<(nx + THREADS - 1) / THREADS, THREADS, 0, stream>>>(d_unew, d_f, nx, ny, h * h);
}
