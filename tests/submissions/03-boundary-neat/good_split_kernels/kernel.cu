/* Known-good (good_split_kernels): a different correct design -- split
 * kernels.  The interior kernel covers 1 <= x <= nx-2, 1 <= y <= ny-2 with
 * no wrapping at all; two small kernels cover the edge rows (y = 0, ny-1) and
 * the edge columns (x = 0, nx-1, rows 1 .. ny-2), wrapping by compare and
 * select.  Every cell is written exactly once; no division or modulo in any
 * kernel.  One thread per cell, so its speed may differ from the reference's. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { EDGE_THREADS = 256 };

__device__ __forceinline__ float update(const float *__restrict__ in, int nx, int xm, int x,
                                        int xp, int ym, int y, int yp, stencil2d_coeffs c)
{
    const size_t row = (size_t)y * nx;
    return c.c0 * in[row + x] + c.xm * in[row + xm] + c.xp * in[row + xp] +
           c.ym * in[(size_t)ym * nx + x] + c.yp * in[(size_t)yp * nx + x];
}

/* An edge cell: every neighbour index wrapped. */
__device__ __forceinline__ void edge_cell(const float *__restrict__ in, float *__restrict__ out,
                                          int nx, int ny, int x, int y, stencil2d_coeffs c)
{
    const int xm = (x == 0) ? nx - 1 : x - 1;
    const int xp = (x == nx - 1) ? 0 : x + 1;
    const int ym = (y == 0) ? ny - 1 : y - 1;
    const int yp = (y == ny - 1) ? 0 : y + 1;
    out[(size_t)y * nx + x] = update(in, nx, xm, x, xp, ym, y, yp, c);
}

/* Interior cells (1 <= x <= nx-2, 1 <= y <= ny-2): no wrapping. */
__global__ void interior_kernel(const float *__restrict__ in, float *__restrict__ out, int nx,
                                int ny, stencil2d_coeffs c)
{
    const int x = 1 + blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx - 1)
        return;
    /* gridDim.y is at most 65535: on a taller grid each thread strides down. */
    for (int y = 1 + blockIdx.y * blockDim.y + threadIdx.y; y < ny - 1; y += gridDim.y * blockDim.y)
        out[(size_t)y * nx + x] = update(in, nx, x - 1, x, x + 1, y - 1, y, y + 1, c);
}

/* Rows 0 and ny-1 (blockIdx.y picks which), all columns. */
__global__ void edge_rows_kernel(const float *__restrict__ in, float *__restrict__ out, int nx,
                                 int ny, stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y == 0 ? 0 : ny - 1;
    if (x < nx)
        edge_cell(in, out, nx, ny, x, y, c);
}

/* Columns 0 and nx-1 (blockIdx.y picks which), rows 1 .. ny-2. */
__global__ void edge_cols_kernel(const float *__restrict__ in, float *__restrict__ out, int nx,
                                 int ny, stencil2d_coeffs c)
{
    const int y = 1 + blockIdx.x * blockDim.x + threadIdx.x;
    const int x = blockIdx.y == 0 ? 0 : nx - 1;
    if (y < ny - 1)
        edge_cell(in, out, nx, ny, x, y, c);
}

extern "C" void stencil2d_periodic_sweep(const float *d_in, float *d_out, int nx, int ny,
                                         stencil2d_coeffs c, cudaStream_t stream)
{
    if (nx > 2 && ny > 2) {
        const dim3 block(128, 2);
        const int blocks_y = (ny - 2 + 1) / 2;
        const dim3 grid((nx - 2 + 127) / 128, blocks_y < 65535 ? blocks_y : 65535);
        interior_kernel<<<grid, block, 0, stream>>>(d_in, d_out, nx, ny, c);
    }
    /* One edge row when ny == 1 (row 0 is row ny-1), else two. */
    edge_rows_kernel<<<dim3((nx + EDGE_THREADS - 1) / EDGE_THREADS, ny > 1 ? 2 : 1), EDGE_THREADS,
                       0, stream>>>(d_in, d_out, nx, ny, c);
    if (ny > 2)
        edge_cols_kernel<<<dim3((ny - 2 + EDGE_THREADS - 1) / EDGE_THREADS, nx > 1 ? 2 : 1),
                           EDGE_THREADS, 0, stream>>>(d_in, d_out, nx, ny, c);
}
