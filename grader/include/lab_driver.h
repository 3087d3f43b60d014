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

#include <stdio.h>

#include "channel.h"
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
 * each case forked, under the lab's case timeout; with CK_FORK=no and
 * THEN_BENCH_ENV=1 (protocol.h), every case in this process and then, when
 * all passed, the timed run (lab_bench_run).  Returns the exit status. */
int lab_check_main(const char *suite_name, const lab_case *cases, int ncases,
                   int argc, char **argv);

/* The timed run (bench.c): finds the GPU, times each launcher of the lab on
 * its bench grid (halved along its slowest axis until it fits the free GPU
 * memory) with inputs drawn from `seed`, at most max_reps timed calls each,
 * the launch audit when audit_wanted, and writes the figures as one JSON
 * object (protocol.h's KEY_*: milliseconds, bytes, GB/s with 1 GB = 1e9
 * bytes) on `out`.  Returns EXIT_OK (measured, even when an output was wrong:
 * the JSON says so), EXIT_NO_GPU (the reason on stderr) or EXIT_DEBUG_BUILD;
 * a CUDA error of the harness goes to the error handler (harness.h), by
 * default the message on stderr and exit(EXIT_CUDA_ERROR). */
int lab_bench_run(FILE *out, uint64_t seed, int max_reps, int audit_wanted);

/* harness_probe, with the reason on stderr when there is no usable GPU.
 * Returns 0, or -1. */
int lab_find_gpu(harness_device *dev);

/* The GPU's name, compute capability ("9.0") and SM count as fields of w
 * (KEY_device, KEY_cc, KEY_sm_count). */
void lab_device_json(json_writer *w, const harness_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_LAB_DRIVER_H */
