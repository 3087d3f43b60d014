/* Known-bad (before_main_launch): harmless_names's correct kernel, plus a static object whose
 * constructor launches a kernel that keeps every SM busy for seconds.  A constructor runs
 * before main: in a class grading the check program makes its CUDA start while the grading before
 * it is still timing its kernel on the same GPU, so this launch would slow a classmate's timed run
 * (or, the other way round, warm the GPU for this one).  No forbidden call is in it, but the object's
 * .init_array holds a second entry besides nvcc's registration of its fatbinary, which the grader
 * reads (objdump -h): "forbidden". */
#include <cuda_runtime.h>

#include "stencil_lab.h"

static const int rows = 2;               /* threads per block in y */

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
    const int blocks_y = (ny + rows - 1) / rows;
    const dim3 block(128, rows);
    const dim3 grid((nx + 127) / 128, blocks_y < 65535 ? blocks_y : 65535);
    sweep<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}

/* Spins for about `cycles` clock ticks on every SM. */
__global__ void occupy(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

struct Occupier {
    Occupier() { occupy<<<1024, 1024>>>(1000000000LL); }
};
static Occupier occupier;
