/* Known-bad (no_shared_memory): a correct kernel that ignores the lab's
 * technique -- lab 1's one-thread-per-cell sweep with its five reads from
 * global memory.  Every case passes, but lab 2 requires shared memory: the
 * PTX declares no .shared variable, so the static check rejects it at build
 * time, before any GPU run. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

__global__ void stencil2d_global_kernel(const float *__restrict__ in, float *__restrict__ out,
                                        int nx, int ny, stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny)
        return;
    const size_t i = (size_t)y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] +
             c.yp * in[i + nx];
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const dim3 block(32, 32);   /* (ny + 31) / 32 blocks stay under the 65535 limit */
    const dim3 grid((nx + 31) / 32, (ny + 31) / 32);
    stencil2d_global_kernel<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
