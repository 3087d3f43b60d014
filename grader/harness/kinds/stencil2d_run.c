/*
 * stencil2d_run.c -- the kind of labs 4 and 8: `steps` 2D Dirichlet sweeps kept on the
 * GPU, ping-ponging d_a and d_b, stencil2d_run.  The launcher returns the
 * buffer holding the result and may overwrite both.
 */
#include "grid_kind.h"

static const float *launch(lab_problem *p, cudaStream_t s)
{
    return stencil2d_run(p->d_in, p->d_out, p->nx, p->ny, p->c2, p->steps, s);
}

static void cpu_sweep(const lab_problem *p, const float *in, float *out)
{
    cpu_stencil2d_sweep(in, out, p->nx, p->ny, p->c2);
}

static void gpu_sweep(const lab_problem *p, const float *d_in, float *d_out, cudaStream_t s)
{
    harness_gpu_stencil2d_sweep(d_in, d_out, p->nx, p->ny, p->c2, s);
}

static const grid_ops OPS = { .launch = launch, .cpu_sweep = cpu_sweep, .gpu_sweep = gpu_sweep };

/* The kind's facts (its launcher, boundary, sweeps per call) are grader/kinds.json's. */
GRID_KIND(OPS);
