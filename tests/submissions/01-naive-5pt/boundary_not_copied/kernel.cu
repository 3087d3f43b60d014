/* Known-bad (boundary_not_copied): boundary cells are left unwritten, as if only the interior mattered. */
#include <cuda_runtime.h>
#include "stencil_lab.h"

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x <= 0 || y <= 0 || x >= nx - 1 || y >= ny - 1)
        return;
    const size_t i = (size_t)y * nx + x;
    out[i] = c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx];
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const dim3 block(32, 32), grid((nx + 31) / 32, (ny + 31) / 32);
    sweep<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
