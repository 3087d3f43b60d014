/* Known-bad (env_lookup): harmless_names's correct kernel, whose block width "tunes itself"
 * from the environment through a macro that pastes the name together, so that no identifier in
 * the file reads `getenv`.  The compiled object still calls getenv, which is not on the symbol
 * whitelist: "forbidden", with the line that needs it. */
#include <cuda_runtime.h>

#include <cstdlib>

#include "stencil_lab.h"

#define SETTING(name) get##env(name)

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
        const size_t i = (size_t)y * nx + x;
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? in[i]
                     : c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] +
                           c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const char *width = SETTING("BLOCK_WIDTH");
    const int bx = width ? atoi(width) : 128;
    const int blocks_y = (ny + 1) / 2;
    const dim3 grid((nx + bx - 1) / bx, blocks_y < 65535 ? blocks_y : 65535);
    sweep<<<grid, dim3(bx, 2), 0, stream>>>(d_in, d_out, nx, ny, c);
}
