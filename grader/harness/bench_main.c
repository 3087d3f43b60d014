/*
 * bench_main.c -- the bench program of every lab: the command around the
 * timed run of bench.c.
 *
 *   bench --json FILE [--seed N] [--reps N] [--no-audit]
 *                             time; one JSON object to FILE ('-': the channel)
 *   bench --probe             the GPU, as one JSON object ('-' rules as above)
 *   bench --describe          the problem kind this build was compiled for
 *   bench --solve N [--reduction R]   a solver's model problem (lab 7)
 *
 * The grader times a kernel inside its check run when it can
 * (check_runner.c), and with this program after a check run in fork mode;
 * the profilers, the tour and the solver use this program.  Exit statuses
 * and JSON keys are protocol.h's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "lab_driver.h"
#include "lab_kind.h"
#include "protocol.h"

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --json FILE [--seed N] [--reps N] [--no-audit] | --probe | --describe |\n"
            "          --solve N [--reduction R]\n"
            "  --json FILE  time the launcher(s) on the lab's bench grid and write the figures to FILE\n"
            "               as one JSON object (FILE '-': the grader's channel, else standard output)\n"
            "  --reps N     at most N timed calls (default: lab.json bench.repetitions)\n"
            "  --no-audit   skip the launch audit (CUPTI); for profilers that hold CUPTI themselves\n"
            "  --probe      print the GPU as JSON (exit %d when there is none)\n"
            "  --describe   print the problem kind this build was compiled for, as JSON (no GPU needed)\n"
            "  --solve N    labs with a solver (7): solve the model problem on an N x N grid until the\n"
            "               residual has fallen by R (default 1e-5); JSON on the channel\n",
            argv0, EXIT_NO_GPU);
    exit(EXIT_USAGE);
}

static FILE *output(const char *path)
{
    if (!strcmp(path, "-"))
        return channel_open();
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(EXIT_FAILED);
    }
    return f;
}


static int probe_main(const char *path)
{
    harness_device dev;
    if (lab_find_gpu(&dev) != 0)
        return EXIT_NO_GPU;
    json_writer w;
    json_begin(&w, output(path));
    lab_device_json(&w, &dev);
    json_integer(&w, KEY_probe_l2_bytes, (long long)dev.l2_bytes);
    json_integer(&w, KEY_probe_global_mem_bytes, (long long)dev.global_mem_bytes);
    json_integer(&w, KEY_probe_mem_free_bytes, (long long)dev.mem_free_bytes);
    json_end(&w);
    return EXIT_OK;
}

/* What the kind module linked into this build states itself (its function table);
 * tests/python/test_kinds.py compares it with grader/kinds.json and the lab's cases. */
static int describe_main(void)
{
    json_writer w;
    json_begin(&w, stdout);
    json_string(&w, KEY_describe_lab, LAB_NAME);
    json_string(&w, KEY_describe_api, KIND_API);
    json_bool(&w, KEY_describe_solver, LAB_KIND.solve != NULL);
    json_bool(&w, KEY_describe_case_modes, LAB_KIND.run_case != NULL);
    json_bool(&w, KEY_describe_deterministic, LAB_KIND.digest != NULL);
    json_integer(&w, KEY_describe_bench_arrays, LAB_KIND.bench_arrays);
    json_end(&w);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    const char *json_path = NULL, *probe_path = NULL;
    uint64_t seed = 0;
    int have_seed = 0, reps = LAB_BENCH_REPS, solve_n = 0, audit_wanted = 1;
    double reduction = 1e-5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--probe"))
            probe_path = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "-";
        else if (!strcmp(argv[i], "--describe"))
            return describe_main();
        else if (!strcmp(argv[i], "--solve") && i + 1 < argc)
            solve_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reduction") && i + 1 < argc)
            reduction = atof(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10), have_seed = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-audit"))
            audit_wanted = 0;
        else
            usage(argv[0]);
    }
    if (probe_path)
        return probe_main(probe_path);
    if (solve_n) {
        if (!LAB_KIND.solve) {
            fprintf(stderr, "--solve: this lab (%s) has no solver\n", KIND_API);
            return EXIT_USAGE;
        }
        if (!(reduction > 0 && reduction < 1)) {
            fprintf(stderr, "--reduction R needs 0 < R < 1, got %g\n", reduction);
            return EXIT_USAGE;
        }
        harness_device dev;
        if (lab_find_gpu(&dev) != 0)
            return EXIT_NO_GPU;
        const long long limit = 40LL * solve_n * solve_n; /* Jacobi needs O(1/h^2) sweeps */
        return LAB_KIND.solve(solve_n, reduction, limit < 1000000 ? (int)limit : 1000000, channel_open());
    }
    if (!json_path || reps < 1)
        usage(argv[0]);
    return lab_bench_run(output(json_path), have_seed ? seed : harness_fresh_seed(), reps, audit_wanted);
}
