/*
 * lab_kind.h -- one problem kind: the few functions the Check suite and the
 * bench need to test and time a student's launcher(s).
 *
 * Kinds: 2D Dirichlet sweep (labs 1, 2), periodic sweep (lab 3), multi-step
 * run (labs 4, 8), 3D sweep (labs 5, 6), residual + Jacobi (lab 7).  Each is
 * one module, grader/harness/kinds/<api>.c, named after lab.json's "api" and
 * defining LAB_KIND; lab.mk links that module alone, so it is the only file
 * that names the student's launcher(s).  Adding a lab of a new kind means
 * writing one such module (and adding its name to labspec.API_VALUES) and the
 * lab's own files; lab_driver.c (the Check cases and the bench) is shared.
 *
 * Every function may fail through harness_fail() (a CUDA error, no memory).
 */
#ifndef STENCIL_LAB_KIND_H
#define STENCIL_LAB_KIND_H

#include "lab_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One problem instance; each module defines the struct. */
typedef struct lab_problem lab_problem;

enum { LAB_MAX_LAUNCHERS = 2 };

typedef struct {
    const char *api;                /* lab.json "api", e.g. "stencil2d_sweep" */
    int nlaunchers;                 /* launchers the student writes (lab 7: 2) */
    const char *launchers[LAB_MAX_LAUNCHERS];  /* their names, for messages */
    int uses_steps;                 /* lab_case.steps matters (multi-step kinds) */
    int bench_arrays;               /* grids of n floats the bench keeps on the GPU, scratch included */

    /* Allocates a problem on c's grid; inputs drawn from `seed` (host and
     * device), outputs poisoned with NaN.  Synchronous. */
    lab_problem *(*create)(const lab_case *c, uint64_t seed);
    void (*destroy)(lab_problem *p);

    /* New input values drawn from `seed`, written on the device by the
     * harness's own kernel, asynchronously on s (the bench, between timed
     * calls); every output poisoned again. */
    void (*refill)(lab_problem *p, uint64_t seed, cudaStream_t s);

    /* Calls launcher `which` (0 <= which < nlaunchers) once, asynchronously. */
    void (*launch)(lab_problem *p, int which, cudaStream_t s);

    /* After launch(which) and a synchronisation: every output cell of
     * launcher `which` against the CPU reference, the guard zones, and the
     * inputs left unchanged where the API says so.  Sets r->ok = 0 and
     * appends to r->message on any difference. */
    void (*verify)(lab_problem *p, int which, harness_report *r);

    /* After launch(which): the output against the harness's own GPU reference
     * (computed from the input seed, never from buffers the student wrote),
     * on s, with the lab's tolerance.  Returns the number of wrong cells and,
     * when not 0, one sentence in why[0..n).  Synchronises s. */
    size_t (*gpu_check)(lab_problem *p, int which, cudaStream_t s, char *why, size_t n);

    /* Bytes launcher `which` must move: each input element read once and each
     * output element written once (per sweep, times the sweeps). */
    double (*compulsory_bytes)(const lab_problem *p, int which);

    /* Optional (NULL when the kind has none): a case whose mode is not
     * LAB_MODE_CELLS, run whole (lab 7: determinism, convergence). */
    void (*run_case)(const lab_case *c, uint64_t seed, harness_report *r);

    /* Optional: `bench --solve N` (lab 7: the model problem on an N x N grid,
     * to a residual reduction, at most max_sweeps sweeps; JSON on stdout).
     * Returns the exit status. */
    int (*solve)(int n, double reduction, int max_sweeps);
} lab_kind;

/* Defined by the one kind module linked into this build. */
extern const lab_kind LAB_KIND;

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_LAB_KIND_H */
