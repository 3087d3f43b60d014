/*
 * grid_kind.h -- the machinery shared by the stencil kinds: one input grid,
 * one output grid, one launcher (labs 1-6 and 8; grader/harness/kinds/grid.c).
 *
 * A stencil kind module (grader/harness/kinds/stencil2d_sweep.c, ...) fills in
 * a grid_ops with what makes it different -- the launcher call, the CPU and
 * GPU references -- and binds it with GRID_KIND(); grid.c does the rest
 * (allocation, seeded inputs, poison, comparison, guard zones, the bench's GPU
 * check).  Which cells are copied boundary cells, and whether a call runs
 * several sweeps, are the kind's facts (KIND_DIRICHLET_DIMS, KIND_MULTI_STEP
 * of lab_config.h, from grader/kinds.json).
 */
#ifndef STENCIL_GRID_KIND_H
#define STENCIL_GRID_KIND_H

#include "lab_kind.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grid_ops grid_ops;

/* One stencil problem: an nx*ny*nz grid of n cells (nz == 1 in 2D). */
struct lab_problem {
    const grid_ops *ops;
    int nx, ny, nz, steps;
    size_t n;
    stencil2d_coeffs c2;
    stencil3d_coeffs c3;
    float w[HARNESS_MAX_WEIGHTS];   /* weights for a kind with a stencil of its own (harness_weights) */
    uint64_t input_seed;        /* the seed the current input values were drawn from */
    float *h_in, *h_want, *h_got;   /* LAB_FOR_CASES only; NULL in the bench */
    float *d_in, *d_out;        /* multi-step kinds: d_a and d_b */
    float *d_scratch[2];        /* the harness's GPU reference (allocated on first use) */
    const float *d_result;      /* where the last launch left its result; NULL: a foreign pointer */
};

struct grid_ops {
    /* Calls the student's launcher; returns the grid holding the result. */
    const float *(*launch)(lab_problem *p, cudaStream_t s);
    /* One sweep in -> out: on the CPU (cpu_reference.c) and with the harness's GPU kernel. */
    void (*cpu_sweep)(const lab_problem *p, const float *in, float *out);
    void (*gpu_sweep)(const lab_problem *p, const float *d_in, float *d_out, cudaStream_t s);
};

lab_problem *grid_create(const grid_ops *ops, const lab_case *c, uint64_t seed, int for_bench);
void grid_destroy(lab_problem *p);
void grid_refill(lab_problem *p, uint64_t seed, cudaStream_t s);
void grid_launch(lab_problem *p, int which, cudaStream_t s);
void grid_verify(lab_problem *p, int which, harness_report *r);
size_t grid_gpu_check(lab_problem *p, int which, cudaStream_t s, char *why, size_t n);

/* Defines LAB_KIND for the grid_ops `ops` (a static const in the kind module). */
#define GRID_KIND(ops)                                                                 \
    static lab_problem *grid_kind_create(const lab_case *c, uint64_t seed, int for_bench) \
    {                                                                                  \
        return grid_create(&(ops), c, seed, for_bench);                                \
    }                                                                                  \
    const lab_kind LAB_KIND = {                                                        \
        .create = grid_kind_create, .destroy = grid_destroy, .refill = grid_refill,    \
        .launch = grid_launch, .verify = grid_verify, .gpu_check = grid_gpu_check,     \
        .bench_arrays = GRID_BENCH_ARRAYS,                                             \
    }

/* Grids a stencil kind keeps on the GPU in the bench: d_in and d_out (d_a and d_b), and the GPU
 * reference's two scratch grids (d_scratch: the input drawn again from the seed and the output,
 * which swap roles sweep after sweep). */
enum { GRID_BENCH_ARRAYS = 4 };

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_GRID_KIND_H */
