/*
 * check_runner.c -- the main of every lab's Check suite.
 *
 * A lab's check_NN.c is only a table of cases; this file turns the table
 * into one Check TCase per theme with one loop test per case, so a case's
 * label ("nx=33 ny=9") comes from the same table entry as its call.
 *
 * CUDA is never touched in the parent: each case runs in the child Check
 * forks for it (CK_FORK=no runs them in-process, for cuda-gdb and
 * compute-sanitizer).  The seed is drawn (or read from SEED) before forking,
 * printed, and mixed with the case index, so a run replays exactly.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lab_config.h"
#include "lab_driver.h"

static const lab_case *g_cases;
static uint64_t g_seed;

/*
 * The exit guard.  Check counts a forked case whose process exits with
 * status 0 as passed, so a launcher that called exit(0) before the comparison
 * would pass every case.  g_in_case is set while a case runs; an exit() then
 * reaches exit_guard (registered with atexit before Check forks, so every
 * child has it), which ends the process with EARLY_EXIT_STATUS instead: Check
 * reports "Early exit with return value 70", and the grader a crash.
 */
enum { EARLY_EXIT_STATUS = 70 };
static volatile int g_in_case;

static void exit_guard(void)
{
    if (g_in_case)
        _exit(EARLY_EXIT_STATUS);
}

/* Inside a forked case, a CUDA error or a failed allocation becomes this
 * case's failure message (ck_abort_msg does not return). */
static void fail_case(const char *message)
{
    ck_abort_msg("%s", message);
}

START_TEST(run_case)
{
    const lab_case *c = &g_cases[_i];
    char label[96];
    harness_report r;
    lab_case_label(c, label, sizeof label);
    harness_set_error_handler(fail_case);
    g_in_case = 1;
    lab_verify(c, harness_mix_seed(g_seed, (uint64_t)_i), &r);
    g_in_case = 0;
    ck_assert_msg(r.ok, "%s: %s", label, r.message);
}
END_TEST

static Suite *make_suite(const char *name, int ncases)
{
    Suite *s = suite_create(name);
    for (int start = 0; start < ncases;) {
        int end = start;
        while (end < ncases && !strcmp(g_cases[end].tcase, g_cases[start].tcase))
            end++;
        TCase *tc = tcase_create(g_cases[start].tcase);
        tcase_set_timeout(tc, LAB_CASE_TIMEOUT_S);
        tcase_set_tags(tc, g_cases[start].tcase); /* CK_EXCLUDE_TAGS=large skips the big grids */
        tcase_add_loop_test(tc, run_case, start, end);
        suite_add_tcase(s, tc);
        start = end;
    }
    return s;
}

int lab_check_main(const char *suite_name, const lab_case *cases, int ncases, int argc, char **argv)
{
    g_cases = cases;
    if (argc > 1 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < ncases; i++) {
            char label[96];
            lab_case_label(&cases[i], label, sizeof label);
            printf("%s\t%d\t%s\n", cases[i].tcase, i, label);
        }
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--list]\n  SEED=N replays a run; CK_FORK=no runs the cases "
                        "in one process (cuda-gdb, compute-sanitizer); CK_RUN_CASE=NAME runs one tcase;\n"
                        "  CK_EXCLUDE_TAGS=large skips the large grids\n",
                argv[0]);
        return 64;
    }
    const char *env = getenv("SEED");
    g_seed = env && *env ? strtoull(env, NULL, 10) : harness_fresh_seed();
    printf("seed: %llu\n", (unsigned long long)g_seed);
    fflush(stdout); /* before fork: the children must not print it again */

    atexit(exit_guard);
    SRunner *sr = srunner_create(make_suite(suite_name, ncases));
    srunner_run_all(sr, CK_NORMAL);
    g_in_case = 0; /* CK_FORK=no: a failed case leaves by longjmp, not through the reset above */
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
