/*
 * lab_driver.h -- one lab's problem, as the Check suite and the bench see it.
 *
 * grader/harness/lab_driver.c implements this once for every lab: it is
 * compiled per lab build with that lab's generated lab_config.h, which says
 * which launcher of stencil_lab.h the lab's kernel.cu defines.
 */
#ifndef STENCIL_LAB_DRIVER_H
#define STENCIL_LAB_DRIVER_H

#include "harness.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One correctness case: a grid (nz == 1 in 2D) and, for lab 4, a step count.
 * tcase groups cases by theme ("degenerate", "block-edges", ...). */
typedef struct {
    const char *tcase;
    int nx, ny, nz, steps;
} lab_case;

/* "nx=33 ny=9" (and " nz=..", " steps=.." where they apply) into buf. */
void lab_case_label(const lab_case *c, char *buf, size_t n);

/* Runs one case end to end on the GPU: seeded input, NaN-poisoned output,
 * the student's launcher, then every cell against the CPU reference, the
 * guard zones, and the input left unchanged.  r->ok says whether it passed. */
void lab_verify(const lab_case *c, uint64_t seed, harness_report *r);

/* Main of a lab's Check suite (check_runner.c): --list prints the cases;
 * otherwise prints the seed (SEED=N in the environment replays it) and runs
 * each case forked, under the lab's case timeout.  Returns the exit status. */
int lab_check_main(const char *suite_name, const lab_case *cases, int ncases,
                   int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_LAB_DRIVER_H */
