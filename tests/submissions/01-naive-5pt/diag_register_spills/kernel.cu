/*
 * Diagnostic submission (profile: spills): a correct sweep whose registers spill to local memory.
 *
 * Each thread owns ROWS consecutive cells of one column and, like lab 2's reference, issues every
 * load before it computes: the ROWS + 2 cells of its column and the 2 * ROWS cells left and right
 * of them, about 50 values live at once.  __maxnreg__(24) caps the kernel at 24 registers per
 * thread (the least ptxas allows on sm_90), so ptxas spills the rest to local memory: each thread
 * stores and reloads them through L1, traffic the kernel did not need (ptxas.log lists the spill
 * bytes; handout 4, "Hints").  `make profile` must name the local-memory traffic first; the grade
 * is "correct".
 *
 * Mapping: x = blockIdx.x * blockDim.x + threadIdx.x (coalesced), rows y0 .. y0 + ROWS - 1 with
 * y0 = (blockIdx.y + k * gridDim.y) * ROWS, so any nx, ny >= 1 is covered (gridDim.y <= 65535).
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { ROWS = 16, THREADS = 128, MAX_GRID_Y = 65535 };

__global__ void __maxnreg__(24)
sweep_spilled(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    const bool x_inner = x > 0 && x < nx - 1;
    for (int y0 = blockIdx.y * ROWS; y0 < ny; y0 += gridDim.y * ROWS) {
        float col[ROWS + 2], left[ROWS], right[ROWS];       /* col[r + 1] is row y0 + r */
#pragma unroll
        for (int r = -1; r <= ROWS; r++) {
            const int y = y0 + r;
            col[r + 1] = (y >= 0 && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int y = y0 + r;
            const bool load = x_inner && y < ny;
            left[r] = load ? in[(size_t)y * nx + x - 1] : 0.0f;
            right[r] = load ? in[(size_t)y * nx + x + 1] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int y = y0 + r;
            if (y >= ny)
                break;
            float v = col[r + 1];                           /* boundary cells: copied */
            if (x_inner && y > 0 && y < ny - 1)
                v = c.c0 * col[r + 1] + c.xm * left[r] + c.xp * right[r] + c.ym * col[r] + c.yp * col[r + 2];
            out[(size_t)y * nx + x] = v;
        }
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + ROWS - 1) / ROWS;
    const dim3 grid((nx + THREADS - 1) / THREADS, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    sweep_spilled<<<grid, THREADS, 0, stream>>>(d_in, d_out, nx, ny, c);
}
