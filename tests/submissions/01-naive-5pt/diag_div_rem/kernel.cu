/*
 * Diagnostic submission (profile: div_rem): a correct one-thread-per-cell sweep that finds its
 * cell from a flat index with `/` and `%` by the run-time nx.  A 32-bit division by a value the
 * compiler does not know is a subroutine of about twenty instructions on a GPU (handout 3, "Why
 * integer division is expensive on a GPU"), paid here for every cell.  The mapping is coalesced
 * (consecutive threads, consecutive cells), so `make profile` must name the division first; lab 1
 * has no constraint against it, so the grade is "correct".
 *
 * Grids of up to 2^31 cells take the 32-bit path (the division the lesson is about); a larger grid
 * (which no case or bench grid has) would take the same code in 64 bits.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { THREADS = 256, MAX_BLOCKS = 1 << 20 };

template <typename Index>
__global__ void sweep_flat(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                           stencil2d_coeffs c)
{
    const Index cells = (Index)nx * (Index)ny, width = (Index)nx;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < cells; i += (Index)gridDim.x * blockDim.x) {
        const int x = (int)(i % width), y = (int)(i / width);      /* the division under study */
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
            out[i] = in[i];
        else
            out[i] = c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - width] +
                     c.yp * in[i + width];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const unsigned long long cells = (unsigned long long)nx * (unsigned long long)ny;
    const unsigned long long want = (cells + THREADS - 1) / THREADS;
    const int blocks = want < MAX_BLOCKS ? (int)want : MAX_BLOCKS;
    if (cells <= 0x7fffffffull)          /* i + stride cannot wrap */
        sweep_flat<unsigned><<<blocks, THREADS, 0, stream>>>(d_in, d_out, nx, ny, c);
    else
        sweep_flat<unsigned long long><<<blocks, THREADS, 0, stream>>>(d_in, d_out, nx, ny, c);
}
