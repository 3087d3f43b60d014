/*
 * lab_driver.c -- one correctness case, for every lab: lab_verify() runs a
 * case of the lab's table on the problem kind linked into the build
 * (lab_kind.h).  check_runner.c turns the table into a Check suite around it;
 * bench.c, the other program of a lab build, shares the kind's facts below.
 *
 * Nothing here knows which lab it serves: the kind module (grader/harness/
 * kinds/) names the student's launchers, and lab_config.h (generated from
 * lab.json and grader/kinds.json) gives the kind's facts and tolerances.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_kind.h"

const char *const KIND_LAUNCHERS[KIND_NLAUNCHERS] = KIND_LAUNCHER_NAMES;

double lab_compulsory_bytes(int which, double cells, int steps)
{
    static const double per_cell[KIND_NLAUNCHERS] = KIND_BYTES_PER_CELL;
    static const double fixed[KIND_NLAUNCHERS] = KIND_BYTES_FIXED;
    return per_cell[which] * cells * (KIND_MULTI_STEP ? steps : 1) + fixed[which];
}

void lab_case_label(const lab_case *c, char *buf, size_t n)
{
    int used = snprintf(buf, n, "nx=%d ny=%d", c->nx, c->ny);
    if (c->nz > 1 && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " nz=%d", c->nz);
    if ((KIND_MULTI_STEP || c->mode != LAB_MODE_CELLS) && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " steps=%d", c->steps);
    if (c->mode != LAB_MODE_CELLS && used >= 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " (%s)",
                 c->mode == LAB_MODE_DETERMINISM ? "determinism" : "convergence");
}

/*
 * Each launcher's launches are checked by harness_launcher_end, which names the
 * launcher and the configuration of a launch the runtime refused (a failure of
 * the case, LAUNCH_REFUSED, not a crash).  After each launcher the whole device is
 * synchronised, not only `stream`: a
 * launcher that (against the API) started work on another stream has it
 * finished before anything is compared.  The bench's audit is what reports
 * such a launcher (grader/README.md, section 6).
 */
void lab_verify(const lab_case *c, uint64_t seed, harness_report *r)
{
    memset(r, 0, sizeof *r);
    r->ok = 1;
    if (c->mode != LAB_MODE_CELLS) {
        if (!LAB_KIND.run_case)
            harness_fail("kit error: this lab's case table has a case of mode %d, which the %s kind "
                         "does not run (lab_kind.h: run_case)", c->mode, KIND_API);
        LAB_KIND.run_case(c, seed, r);
        return;
    }
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    lab_problem *p = LAB_KIND.create(c, seed, LAB_FOR_CASES);
    for (int w = 0; w < KIND_NLAUNCHERS; w++) {
        harness_launcher_begin(KIND_LAUNCHERS[w]);
        LAB_KIND.launch(p, w, stream);
        harness_launcher_end(stream, 1);
        CUDA_CHECK(cudaDeviceSynchronize());
        LAB_KIND.verify(p, w, r);
    }
    LAB_KIND.destroy(p);
    CUDA_CHECK(cudaStreamDestroy(stream));
}
