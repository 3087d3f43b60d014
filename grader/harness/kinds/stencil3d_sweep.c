/*
 * stencil3d_sweep.c -- the kind of labs 5 and 6: one 3D 7-point sweep with a fixed
 * (Dirichlet) boundary, stencil3d_sweep of stencil_lab.h.
 */
#include "grid_kind.h"

static const float *launch(lab_problem *p, cudaStream_t s)
{
    stencil3d_sweep(p->d_in, p->d_out, p->nx, p->ny, p->nz, p->c3, s);
    return p->d_out;
}

static void cpu_sweep(const lab_problem *p, const float *in, float *out)
{
    cpu_stencil3d_sweep(in, out, p->nx, p->ny, p->nz, p->c3);
}

static void gpu_sweep(const lab_problem *p, const float *d_in, float *d_out, cudaStream_t s)
{
    harness_gpu_stencil3d_sweep(d_in, d_out, p->nx, p->ny, p->nz, p->c3, s);
}

static const grid_ops OPS = { .launch = launch, .cpu_sweep = cpu_sweep, .gpu_sweep = gpu_sweep };

/* The kind's facts (its launcher, boundary, sweeps per call) are grader/kinds.json's. */
GRID_KIND(OPS);
