/*
 * grid_kind.h -- the machinery shared by the stencil kinds: one input grid,
 * one output grid, one launcher (labs 1-6 and 8).
 *
 * A stencil kind module (grader/harness/kinds/stencil2d_sweep.c, ...) fills in a
 * grid_ops with what makes it different -- the launcher call, the CPU and GPU
 * references, which cells are copied boundary cells -- and binds it with
 * GRID_KIND(); grid_kind.c does the rest (allocation, seeded inputs, poison,
 * comparison, guard zones, the bench's GPU check).
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
    uint64_t input_seed;        /* the seed the current input values were drawn from */
    float *h_in, *h_want, *h_got;
    float *d_in, *d_out;        /* multi-step kinds: d_a and d_b */
    float *d_scratch[2];        /* the harness's GPU reference (bench only; allocated on first use) */
    const float *d_result;      /* where the last launch left its result; NULL: a foreign pointer */
};

struct grid_ops {
    const char *api;            /* the launcher's name */
    int dirichlet_dims;         /* 2 or 3: boundary cells must be copied bit for bit; 0: none */
    int multi_step;             /* `steps` sweeps ping-ponging d_in and d_out, which may be overwritten */
    /* Calls the student's launcher; returns the grid holding the result. */
    const float *(*launch)(lab_problem *p, cudaStream_t s);
    /* One sweep in -> out: on the CPU (cpu_reference.c) and with the harness's GPU kernel. */
    void (*cpu_sweep)(const lab_problem *p, const float *in, float *out);
    void (*gpu_sweep)(const lab_problem *p, const float *d_in, float *d_out, cudaStream_t s);
};

lab_problem *grid_create(const grid_ops *ops, const lab_case *c, uint64_t seed);
void grid_destroy(lab_problem *p);
void grid_refill(lab_problem *p, uint64_t seed, cudaStream_t s);
void grid_launch(lab_problem *p, int which, cudaStream_t s);
void grid_verify(lab_problem *p, int which, harness_report *r);
size_t grid_gpu_check(lab_problem *p, int which, cudaStream_t s, char *why, size_t n);
double grid_compulsory_bytes(const lab_problem *p, int which);

/* Defines LAB_KIND for the grid_ops `ops` (a static const in the kind module);
 * api and multi_step repeat its fields as constants, as C's static
 * initialisers require. */
#define GRID_KIND(ops, api_, multi_step_)                                                \
    static lab_problem *grid_kind_create(const lab_case *c, uint64_t seed)             \
    {                                                                                  \
        return grid_create(&(ops), c, seed);                                           \
    }                                                                                  \
    const lab_kind LAB_KIND = {                                                        \
        .api = api_, .nlaunchers = 1, .launchers = { api_ },                           \
        .uses_steps = multi_step_, .bench_arrays = 4,                                  \
        .create = grid_kind_create, .destroy = grid_destroy, .refill = grid_refill,    \
        .launch = grid_launch, .verify = grid_verify, .gpu_check = grid_gpu_check,     \
        .compulsory_bytes = grid_compulsory_bytes,                                    \
    }

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_GRID_KIND_H */
