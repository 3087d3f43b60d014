/*
 * lab_driver.h -- one lab's cases, as its Check suite (check_NN.c) sees them.
 *
 * grader/harness/lab_driver.c implements this once for every lab, on top of
 * the problem kind linked into the lab's build (lab_kind.h); it is compiled
 * per lab build with that lab's generated lab_config.h (tolerances, timeouts,
 * the bench grid).
 */
#ifndef STENCIL_LAB_DRIVER_H
#define STENCIL_LAB_DRIVER_H

#include "harness.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a case checks.  LAB_MODE_CELLS (0, the default of a table row that
 * names no mode): every launcher of the lab once, every output cell against
 * the CPU reference.  The others are run whole by the kind's run_case
 * (lab_kind.h); a kind without one reports such a case as a kit error. */
enum {
    LAB_MODE_CELLS = 0,
    LAB_MODE_DETERMINISM, /* the same inputs `steps` times: every bit equal */
    LAB_MODE_CONVERGENCE  /* a solver on a problem with a known rate and solution */
};

/* One correctness case: a grid (nz == 1 in 2D), a step count where the kind
 * uses one (labs 4, 8; lab 7's determinism and convergence cases), and a
 * mode.  tcase groups cases by theme ("degenerate", "block-edges", ...). */
typedef struct {
    const char *tcase;
    int nx, ny, nz, steps;
    int mode;
} lab_case;

/* "nx=33 ny=9" (and " nz=..", " steps=..", the mode where they apply) into buf. */
void lab_case_label(const lab_case *c, char *buf, size_t n);

/* Runs one case end to end on the GPU: seeded inputs, NaN-poisoned outputs,
 * each of the student's launchers, then every cell against the CPU reference,
 * the guard zones, and the inputs left unchanged (or the mode's own check).
 * r->ok says whether it passed. */
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
