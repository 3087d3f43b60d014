/*
 * Diagnostic submission (profile: dram_excess): a correct one-thread-per-cell sweep that visits
 * the rows in bit-reversed order.
 *
 * Accesses are coalesced (threadIdx.x walks x) and each thread computes one cell, as in lab 1's
 * reference; only the order of the rows changes.  Row t of the launch is row bitreverse(t) of the
 * grid, so rows y and y+1 are processed half a grid apart in time: by the time a block needs its
 * neighbours' rows y-1 and y+1, the L2 cache has long dropped them, and they come from DRAM again.
 * The kernel reads its input about three times over (handout 1, "Caches: why the naive kernel does
 * better than 0.45 OP/B suggests"), so `make profile` must name the DRAM traffic above the
 * compulsory bytes first; the grade is "correct".
 *
 * Rows: the launch walks t = 0 .. 2^k - 1 (2^k the least power of two >= ny), row y =
 * bitreverse_k(t), skipping y >= ny; gridDim.y <= 65535, so t strides by gridDim.y.  Any nx, ny >= 1.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { THREADS = 256, MAX_GRID_Y = 65535 };

__global__ void sweep_scattered_rows(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                                     int bits, stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    for (unsigned t = blockIdx.y; t < (1u << bits); t += gridDim.y) {
        const int y = bits == 0 ? 0 : (int)(__brev(t) >> (32 - bits));     /* bit-reversed row */
        if (y >= ny)
            continue;
        const size_t i = (size_t)y * nx + x;
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
            out[i] = in[i];
        else
            out[i] = c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    int bits = 0;
    while ((1 << bits) < ny)
        bits++;                                            /* 2^bits >= ny; ny < 2^31 */
    const int rows = 1 << bits;
    const dim3 grid((nx + THREADS - 1) / THREADS, rows < MAX_GRID_Y ? rows : MAX_GRID_Y);
    sweep_scattered_rows<<<grid, THREADS, 0, stream>>>(d_in, d_out, nx, ny, bits, c);
}
