/* Known-bad (textbook_tall_grid): the textbook's z-coarsened 3D stencil as the book writes it
 * (PMPP 4th ed., section 8.5: a 16 x 16 input tile of three shared planes marching 14 planes),
 * ported to this lab's API and nothing more.  Two habits of the book's kernels meet the lab's
 * cases: they write only the interior, leaving every boundary cell unwritten (the harness's NaN
 * poison stays there), and they size the grid as ceil(ny / 14) x ceil(nz / 14) blocks, which
 * the runtime refuses above 65535 on the tall and deep grids.  29 of the 32 cases are wrong and
 * 3 fail to launch: "incorrect", the message counting both, each refused case naming
 * stencil3d_sweep and the gridDim it asked for (it used to read `crash`, naming a
 * line of the harness). */
#include <cuda_runtime.h>

#include "stencil_lab.h"

#define IN_TILE_DIM 16
#define OUT_TILE_DIM ((IN_TILE_DIM) - 2)

__global__ void stencil_kernel(const float *in, float *out, int nx, int ny, int nz, stencil3d_coeffs c)
{
    const int iStart = blockIdx.z * OUT_TILE_DIM;
    const int j = blockIdx.y * OUT_TILE_DIM + threadIdx.y - 1;
    const int k = blockIdx.x * OUT_TILE_DIM + threadIdx.x - 1;
    const size_t plane = (size_t)nx * ny;
    __shared__ float inPrev_s[IN_TILE_DIM][IN_TILE_DIM];
    __shared__ float inCurr_s[IN_TILE_DIM][IN_TILE_DIM];
    __shared__ float inNext_s[IN_TILE_DIM][IN_TILE_DIM];
    if (iStart - 1 >= 0 && iStart - 1 < nz && j >= 0 && j < ny && k >= 0 && k < nx)
        inPrev_s[threadIdx.y][threadIdx.x] = in[(iStart - 1) * plane + (size_t)j * nx + k];
    if (iStart >= 0 && iStart < nz && j >= 0 && j < ny && k >= 0 && k < nx)
        inCurr_s[threadIdx.y][threadIdx.x] = in[iStart * plane + (size_t)j * nx + k];
    for (int i = iStart; i < iStart + OUT_TILE_DIM; ++i) {
        if (i + 1 >= 0 && i + 1 < nz && j >= 0 && j < ny && k >= 0 && k < nx)
            inNext_s[threadIdx.y][threadIdx.x] = in[(i + 1) * plane + (size_t)j * nx + k];
        __syncthreads();
        if (i >= 1 && i < nz - 1 && j >= 1 && j < ny - 1 && k >= 1 && k < nx - 1) {
            if (threadIdx.y >= 1 && threadIdx.y < IN_TILE_DIM - 1 && threadIdx.x >= 1 &&
                threadIdx.x < IN_TILE_DIM - 1) {
                out[i * plane + (size_t)j * nx + k] = c.c0 * inCurr_s[threadIdx.y][threadIdx.x]
                    + c.xm * inCurr_s[threadIdx.y][threadIdx.x - 1] + c.xp * inCurr_s[threadIdx.y][threadIdx.x + 1]
                    + c.ym * inCurr_s[threadIdx.y - 1][threadIdx.x] + c.yp * inCurr_s[threadIdx.y + 1][threadIdx.x]
                    + c.zm * inPrev_s[threadIdx.y][threadIdx.x] + c.zp * inNext_s[threadIdx.y][threadIdx.x];
            }
        }
        __syncthreads();
        inPrev_s[threadIdx.y][threadIdx.x] = inCurr_s[threadIdx.y][threadIdx.x];
        inCurr_s[threadIdx.y][threadIdx.x] = inNext_s[threadIdx.y][threadIdx.x];
    }
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    const dim3 grid((nx + OUT_TILE_DIM - 1) / OUT_TILE_DIM, (ny + OUT_TILE_DIM - 1) / OUT_TILE_DIM,
                    (nz + OUT_TILE_DIM - 1) / OUT_TILE_DIM);
    stencil_kernel<<<grid, dim3(IN_TILE_DIM, IN_TILE_DIM, 1), 0, stream>>>(d_in, d_out, nx, ny, nz, c);
}
