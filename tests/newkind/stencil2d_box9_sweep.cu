/*
 * stencil2d_box9_sweep.cu -- the worked example's kind (tests/newkind/): one 2D 9-point box
 * sweep with a fixed (Dirichlet) boundary, stencil2d_box9_sweep of stencil_lab.h.
 *
 * A kind with new maths brings its references along: the CPU reference and the GPU reference
 * kernel live here, not in the shared harness.  Both evaluate a cell in the order stencil_lab.h
 * states, each product and sum rounded on its own (__fmul_rn, __fadd_rn on the GPU), so they
 * agree bit for bit.  Everything else -- allocation, seeded inputs, poison, comparison, guard
 * zones, the bench's check -- is grid.c's.
 */
#include <cuda_runtime.h>

#include "grid_kind.h"

static stencil2d_box9_coeffs coeffs(const lab_problem *p)
{
    stencil2d_box9_coeffs c;
    for (int k = 0; k < 9; k++)
        c.w[k] = p->w[k];         /* the nine weights OPS declares, drawn from the case's seed (grid.c) */
    return c;
}

static const float *launch(lab_problem *p, cudaStream_t s)
{
    stencil2d_box9_sweep(p->d_in, p->d_out, p->nx, p->ny, coeffs(p), s);
    return p->d_out;
}

static void cpu_sweep(const lab_problem *p, const float *in, float *out)
{
    const int nx = p->nx, ny = p->ny;
    const stencil2d_box9_coeffs c = coeffs(p);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            const size_t i = (size_t)y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[i] = in[i];
                continue;
            }
            float v = 0.0f;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++)
                    v = v + c.w[3 * (dy + 1) + dx + 1] * in[(size_t)(y + dy) * nx + (x + dx)];
            out[i] = v;
        }
}

static __global__ void box9_reference(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                                      stencil2d_box9_coeffs c)
{
    for (long long y = blockIdx.y; y < ny; y += gridDim.y)
        for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x) {
            const size_t i = (size_t)y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[i] = in[i];
                continue;
            }
            float v = 0.0f;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++)
                    v = __fadd_rn(v, __fmul_rn(c.w[3 * (dy + 1) + dx + 1], in[(size_t)(y + dy) * nx + (x + dx)]));
            out[i] = v;
        }
}

static void gpu_sweep(const lab_problem *p, const float *d_in, float *d_out, cudaStream_t s)
{
    const dim3 grid((unsigned)((p->nx + 255) / 256 < 64 ? (p->nx + 255) / 256 : 64),
                    (unsigned)(p->ny < 8192 ? p->ny : 8192));
    box9_reference<<<grid, 256, 0, s>>>(d_in, d_out, p->nx, p->ny, coeffs(p));
    CUDA_CHECK_LAUNCH(s, 0);
}

/* The weights: nine of its own (lab_problem.w), drawn distinct from the case's seed by grid.c. */
static const grid_ops OPS = { launch, cpu_sweep, gpu_sweep, 9 };

/* The kind's facts (its launcher, boundary, sweeps per call) are grader/kinds.json's. */
GRID_KIND(OPS);
