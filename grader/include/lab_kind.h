/*
 * lab_kind.h -- one problem kind: the few functions the Check suite and the
 * bench need to test and time a student's launcher(s).
 *
 * A kind's facts (its launchers, dimensions, boundary, whether a call runs
 * several sweeps, the compulsory bytes per cell) are declared once, in
 * grader/kinds.json; each lab build gets them as the KIND_* macros of its
 * generated lab_config.h, and the kind's module uses those macros rather than
 * restating them.  The module itself -- its sources under
 * grader/harness/kinds/, named in kinds.json -- supplies what differs between
 * kinds: the inputs, the call of the launcher(s), the CPU and GPU references
 * and the comparison.  It is the only harness code that names a student's
 * launcher.  lab_driver.c (the Check cases), check_runner.c and bench.c are
 * shared by every kind.
 *
 * Every function may fail through harness_fail() (a CUDA error, no memory).
 */
#ifndef STENCIL_LAB_KIND_H
#define STENCIL_LAB_KIND_H

#include <stdio.h>

#include "lab_config.h"
#include "lab_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One problem instance; each module defines the struct. */
typedef struct lab_problem lab_problem;

enum { LAB_MAX_LAUNCHERS = 2 };

/* How create() prepares a problem: for the Check cases, with host copies of
 * the inputs (the CPU reference checks every cell); for the bench, on the
 * device alone (its grid is large, and every timed call is checked by the
 * harness's GPU reference instead). */
enum { LAB_FOR_CASES = 0, LAB_FOR_BENCH = 1 };

typedef struct {
    /* Allocates a problem on c's grid; inputs drawn from `seed`, outputs
     * poisoned with NaN.  for_bench: LAB_FOR_CASES or LAB_FOR_BENCH.  Synchronous. */
    lab_problem *(*create)(const lab_case *c, uint64_t seed, int for_bench);
    void (*destroy)(lab_problem *p);

    /* New input values drawn from `seed`, written on the device by the
     * harness's own kernel, asynchronously on s (the bench, between calls);
     * every output poisoned again. */
    void (*refill)(lab_problem *p, uint64_t seed, cudaStream_t s);

    /* Calls launcher `which` (0 <= which < KIND_NLAUNCHERS) once, asynchronously. */
    void (*launch)(lab_problem *p, int which, cudaStream_t s);

    /* After launch(which) and a device synchronisation, on a problem made
     * LAB_FOR_CASES: every output cell of launcher `which` against the CPU
     * reference, the guard zones, and the inputs left unchanged where the API
     * says so.  Sets r->ok = 0 and appends to r->message on any difference. */
    void (*verify)(lab_problem *p, int which, harness_report *r);

    /* After launch(which) and a device synchronisation: the output against the
     * harness's own GPU reference (computed from the input seed, never from
     * buffers the student wrote), on s, with the lab's tolerance.  Returns the
     * number of wrong cells and, when not 0, one sentence in why[0..n).
     * Synchronises s. */
    size_t (*gpu_check)(lab_problem *p, int which, cudaStream_t s, char *why, size_t n);

    /* Grids of the bench's size the kind keeps on the GPU, scratch included
     * (the bench scales the grid down until they fit). */
    int bench_arrays;

    /* Optional (NULL when the kind asks no determinism): a digest of launcher `which`'s
     * output after a call (harness_digest), synchronising s.  With it, the bench calls each
     * launcher again on the first timed call's input and compares the digests: the API's
     * "the same bits on every run", checked on the bench's grid (lab 7). */
    uint64_t (*digest)(lab_problem *p, int which, cudaStream_t s);

    /* Optional (NULL when the kind has none): a case whose mode is not
     * LAB_MODE_CELLS, run whole (lab 7: determinism, convergence). */
    void (*run_case)(const lab_case *c, uint64_t seed, harness_report *r);

    /* Optional: `bench --solve N` (lab 7: the model problem on an N x N grid,
     * to a residual reduction, at most max_sweeps sweeps), one JSON object
     * written to `out` (the channel).  Returns the exit status. */
    int (*solve)(int n, double reduction, int max_sweeps, FILE *out);
} lab_kind;

/* Defined by the one kind module linked into this build. */
extern const lab_kind LAB_KIND;

/* The kind's facts, from lab_config.h (grader/kinds.json). */
extern const char *const KIND_LAUNCHERS[KIND_NLAUNCHERS];

/* Bytes one call of launcher `which` must move on a grid of `cells` cells running
 * `steps` sweeps per call: grader/kinds.json's bytes_per_cell x cells x steps +
 * bytes_fixed.  1 GB = 1e9 bytes in every bandwidth computed from it. */
double lab_compulsory_bytes(int which, double cells, int steps);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_LAB_KIND_H */
