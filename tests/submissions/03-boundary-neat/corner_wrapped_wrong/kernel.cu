/* Known-bad (corner_wrapped_wrong): one thread per cell, neighbours wrapped
 * with compare and select (no division or modulo, so the static check
 * passes).  Edge columns and edge rows are handled in two branches; the
 * edge-column branch wraps x but only clamps y, assuming the edge rows are
 * handled by the other branch -- which the four corner cells never reach.
 * The corners take their y-1 or y+1 neighbour from their own row instead of
 * the opposite edge: wrong on every grid with ny >= 2. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

__global__ void stencil2d_periodic_select_kernel(const float *__restrict__ in,
                                                 float *__restrict__ out, int nx, int ny,
                                                 stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny)
        return;
    int xm = x - 1, xp = x + 1, ym = y - 1, yp = y + 1;
    if (x == 0 || x == nx - 1) {
        xm = (x == 0) ? nx - 1 : x - 1;
        xp = (x == nx - 1) ? 0 : x + 1;
        ym = (y == 0) ? 0 : y - 1;                 /* BUG: should wrap to ny - 1 */
        yp = (y == ny - 1) ? ny - 1 : y + 1;       /* BUG: should wrap to 0 */
    } else if (y == 0 || y == ny - 1) {
        ym = (y == 0) ? ny - 1 : y - 1;
        yp = (y == ny - 1) ? 0 : y + 1;
    }
    const size_t row = (size_t)y * nx;
    out[row + x] = c.c0 * in[row + x] + c.xm * in[row + xm] + c.xp * in[row + xp] +
                   c.ym * in[(size_t)ym * nx + x] + c.yp * in[(size_t)yp * nx + x];
}

extern "C" void stencil2d_periodic_sweep(const float *d_in, float *d_out, int nx, int ny,
                                         stencil2d_coeffs c, cudaStream_t stream)
{
    const dim3 block(32, 32);   /* (ny + 31) / 32 blocks stay under the 65535 limit */
    const dim3 grid((nx + 31) / 32, (ny + 31) / 32);
    stencil2d_periodic_select_kernel<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
}
