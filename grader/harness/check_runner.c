/*
 * check_runner.c -- the main of every lab's Check suite.
 *
 * A lab's check_NN.c is only a table of cases; this file turns the table
 * into one Check TCase per theme with one loop test per case, so a case's
 * label ("nx=33 ny=9") comes from the same table entry as its call.
 *
 * Two ways to run, chosen by Check's CK_FORK:
 *   - fork mode (the default): each case in a child process of its own, with
 *     the lab's case timeout; CUDA is never touched in the parent.  A crash or
 *     a hang costs that case only.
 *   - CK_FORK=no: every case in this one process, CUDA initialised once (a
 *     context per forked case costs about 0.35 s on an H100).  No timeouts:
 *     the grader watches the run, and reruns in fork mode, one process per
 *     case, every case that did not pass here (grader/stencil_grader/grading/
 *     checkrun.py).  This mode first looks for a GPU, and exits with
 *     EXIT_NO_GPU (protocol.h) when there is none.  With THEN_BENCH_ENV=1
 *     (the grader's runs), once every case has passed it writes the line
 *     BENCH_STARTED on the channel and times the kernel in this same process
 *     (bench.c, lab_bench_run): the bench's JSON follows that line, and the
 *     exit status is the timed run's.  A grading then pays one CUDA start,
 *     not two: CUDA starts are serialised across a host (grader/README.md,
 *     section 9).  With GO_FD_ENV set (a class grading), the run makes its
 *     CUDA start, writes its `device:` line, and then waits for one byte on
 *     that descriptor before its first case: the grader sends it once this
 *     grading holds its GPU, so the start overlaps the grading before it.
 * STENCIL_CASES=3,7,8 runs only those cases of the table (the grader's
 * reruns); the iteration numbers stay the table's.
 *
 * Where the results go: with the grader's private channel (channel.h), the
 * seed, the GPU and Check's XML log go there, and nothing of the harness's
 * goes to stdout, which the student's code (a kernel's printf) has to itself.
 * Without it (run by hand), the seed and Check's summary go to stdout.
 * The seed is drawn (or read from SEED) before any case, and mixed with the
 * case index, so a run replays exactly.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "lab_driver.h"
#include "lab_kind.h"
#include "protocol.h"

static const lab_case *g_cases;
static uint64_t g_seed;

/*
 * The exit guard.  Check counts a forked case whose process exits with
 * status 0 as passed, so a launcher that called exit(0) before the comparison
 * would pass every case.  g_in_case is set while a case runs; an exit() then
 * reaches exit_guard (registered with atexit before Check forks, so every
 * child has it), which ends the process with EXIT_EARLY_EXIT instead: Check
 * reports "Early exit with return value 70", and the grader a crash.
 */
static volatile int g_in_case;

static void exit_guard(void)
{
    if (g_in_case)
        _exit(EXIT_EARLY_EXIT);
}

/* A class grading's run waits here, its CUDA start made, until the grader
 * holds the GPU for it: one byte on the descriptor GO_FD_ENV names (no such
 * variable: no wait).  End of file instead means the grader gave up on this
 * run: it ends with EXIT_NO_GO, having run no case.  No code of the
 * student's has run by then: the symbol check refuses static initializers
 * and constructors in kernel.cu (grader/README.md, section 6). */
static int wait_for_go(void)
{
    const char *text = getenv(GO_FD_ENV);
    if (!text || !*text)
        return 0;
    const int fd = env_fd(GO_FD_ENV);
    if (fd < 0) {
        fprintf(stderr, "%s=%s is not a file descriptor number\n", GO_FD_ENV, text);
        return -1;
    }
    char byte;
    ssize_t got;
    do
        got = read(fd, &byte, 1);
    while (got < 0 && errno == EINTR);
    close(fd);
    return got == 1 ? 0 : -1;
}

/* Inside a case, a CUDA error or a failed allocation becomes this case's
 * failure message (ck_abort_msg does not return). */
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

/* Which cases of the table to run: all, or the indices listed in STENCIL_CASES.
 * Returns 0, or -1 (with a message) when the list names no case of the table. */
static int select_cases(int ncases, char *chosen)
{
    const char *list = getenv("STENCIL_CASES");
    memset(chosen, !(list && *list), (size_t)ncases);
    if (!(list && *list))
        return 0;
    for (const char *s = list; *s;) {
        char *end;
        const long i = strtol(s, &end, 10);
        if (end == s || i < 0 || i >= ncases) {
            fprintf(stderr, "STENCIL_CASES=%s: %.*s is not a case of this lab (0 .. %d)\n", list,
                    (int)strcspn(s, ","), s, ncases - 1);
            return -1;
        }
        chosen[i] = 1;
        s = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* One TCase per theme (a run of table entries with the same tcase name), one loop test
 * per run of consecutive chosen cases in it. */
static Suite *make_suite(const char *name, int ncases, const char *chosen)
{
    Suite *s = suite_create(name);
    for (int start = 0; start < ncases;) {
        int end = start;
        while (end < ncases && !strcmp(g_cases[end].tcase, g_cases[start].tcase))
            end++;
        TCase *tc = NULL;
        for (int i = start; i < end;) {
            if (!chosen[i]) {
                i++;
                continue;
            }
            int j = i;
            while (j < end && chosen[j])
                j++;
            if (!tc) {
                tc = tcase_create(g_cases[start].tcase);
                tcase_set_timeout(tc, LAB_CASE_TIMEOUT_S);
                tcase_set_tags(tc, g_cases[start].tcase); /* CK_EXCLUDE_TAGS=large skips the big grids */
                suite_add_tcase(s, tc);
            }
            tcase_add_loop_test(tc, run_case, i, j);
            i = j;
        }
        start = end;
    }
    return s;
}

/* A CUDA error of the timed run ends the process with EXIT_CUDA_ERROR, as in the bench program:
 * the harness's own exit, so the exit guard lets it through. */
static void timed_run_failed(const char *message)
{
    g_in_case = 0;
    fprintf(stderr, "%s\n", message);
    exit(EXIT_CUDA_ERROR);
}

/* In one-process mode, once every case has passed and the grader asked (THEN_BENCH_ENV): the
 * timed run, its JSON after the BENCH_STARTED line.  The exit guard stays on while it runs (the
 * student's launchers run again): an exit() of theirs ends the process with EXIT_EARLY_EXIT. */
static int bench_after_cases(FILE *out)
{
    harness_set_error_handler(timed_run_failed);
    fprintf(out, "%s\n", BENCH_STARTED);
    fflush(out);
    g_in_case = 1;
    const int status = lab_bench_run(out, g_seed, LAB_BENCH_REPS, 1);
    g_in_case = 0;
    return status;
}

/* In one-process mode: the GPU as one JSON line on the channel, or exit EXIT_NO_GPU. */
static void report_device(FILE *out)
{
    harness_device dev;
    char why[512];
    if (harness_probe(&dev, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        exit(EXIT_NO_GPU);
    }
    json_writer w;
    fputs("device: ", out);
    json_begin(&w, out);
    json_string(&w, KEY_device_name, dev.name);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", dev.cc_major, dev.cc_minor);
    json_string(&w, KEY_device_cc, cc);
    json_integer(&w, KEY_device_sm_count, dev.sm_count);
    json_integer(&w, KEY_device_l2_bytes, (long long)dev.l2_bytes);
    json_integer(&w, KEY_device_global_mem_bytes, (long long)dev.global_mem_bytes);
    json_integer(&w, KEY_device_mem_free_bytes, (long long)dev.mem_free_bytes);
    json_end(&w);
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
        return EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--list]\n  SEED=N replays a run; CK_FORK=no runs the cases "
                        "in one process (cuda-gdb, compute-sanitizer); CK_RUN_CASE=NAME runs one tcase;\n"
                        "  CK_EXCLUDE_TAGS=large skips the large grids; STENCIL_CASES=3,7 runs those cases\n",
                argv[0]);
        return EXIT_USAGE;
    }
    char *chosen = malloc((size_t)ncases + 1);
    if (!chosen || select_cases(ncases, chosen) != 0)
        return EXIT_USAGE;
    const char *env = getenv("SEED");
    g_seed = env && *env ? strtoull(env, NULL, 10) : harness_fresh_seed();
    char log_path[64];
    const int to_channel = channel_path(log_path, sizeof log_path) == 0;
    FILE *out = channel_open();
    fprintf(out, "seed: %llu\n", (unsigned long long)g_seed);
    fflush(out);                   /* before fork: the children must not print it again */

    SRunner *sr = srunner_create(make_suite(suite_name, ncases, chosen));
    const int nofork = srunner_fork_status(sr) == CK_NOFORK;
    if (nofork) {
        report_device(out);        /* CUDA may be touched here: nothing forks */
        if (wait_for_go() != 0) {
            srunner_free(sr);
            free(chosen);
            return EXIT_NO_GO;
        }
    }
    if (to_channel)
        srunner_set_xml(sr, log_path);
    atexit(exit_guard);
    srunner_run_all(sr, to_channel ? CK_SILENT : CK_NORMAL);
    g_in_case = 0; /* CK_FORK=no: a failed case leaves by longjmp, not through the reset above */
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);              /* Check's XML log is complete and closed */
    free(chosen);
    if (failed)
        return EXIT_FAILED;
    const char *then_bench = getenv(THEN_BENCH_ENV);
    if (nofork && to_channel && then_bench && !strcmp(then_bench, "1"))
        return bench_after_cases(out);
    return EXIT_OK;
}
