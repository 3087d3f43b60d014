/* Known-good (harmless_names): a correct one-thread-per-cell sweep whose names start like the
 * harness's (cpu_, harness_).  Names are the student's to choose: the grader judges the compiled
 * object's symbols, not identifiers, so this file must pass.  It is also the honest twin of
 * forger, env_lookup, raw_syscall and before_main_launch: the same kernel and launcher, without their cheat. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

const int cpu_count = 0;                 /* a name the old lexical rules rejected */
static const int harness_rows = 2;       /* threads per block in y */

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
    const int blocks_y = (ny + harness_rows - 1) / harness_rows + cpu_count;
    const dim3 block(128, harness_rows);
    const dim3 grid((nx + 127) / 128, blocks_y < 65535 ? blocks_y : 65535);
    sweep<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
