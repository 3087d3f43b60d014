/*
 * lab_driver.c -- the two programs every lab builds on its problem kind
 * (lab_kind.h): lab_verify(), one correctness case of the Check suite, and,
 * compiled with -DLAB_BENCH_MAIN, main() of the bench.
 *
 * Nothing here knows which lab it serves: the kind module linked beside it
 * (grader/harness/kinds/) names the student's launchers, and lab_config.h
 * (generated from lab.json) gives the bench grid and the repetitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_config.h"
#include "lab_kind.h"

void lab_case_label(const lab_case *c, char *buf, size_t n)
{
    int used = snprintf(buf, n, "nx=%d ny=%d", c->nx, c->ny);
    if (c->nz > 1 && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " nz=%d", c->nz);
    if ((LAB_KIND.uses_steps || c->mode != LAB_MODE_CELLS) && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " steps=%d", c->steps);
    if (c->mode != LAB_MODE_CELLS && used >= 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " (%s)",
                 c->mode == LAB_MODE_DETERMINISM ? "determinism" : "convergence");
}

void lab_verify(const lab_case *c, uint64_t seed, harness_report *r)
{
    memset(r, 0, sizeof *r);
    r->ok = 1;
    if (c->mode != LAB_MODE_CELLS) {
        if (!LAB_KIND.run_case)
            harness_fail("kit error: this lab's case table has a case of mode %d, which the %s kind "
                         "does not run (lab_kind.h: run_case)", c->mode, LAB_KIND.api);
        LAB_KIND.run_case(c, seed, r);
        return;
    }
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    lab_problem *p = LAB_KIND.create(c, seed);
    for (int w = 0; w < LAB_KIND.nlaunchers; w++) {
        LAB_KIND.launch(p, w, stream);
        CUDA_CHECK_LAUNCH(stream, 1);
        LAB_KIND.verify(p, w, r);
    }
    LAB_KIND.destroy(p);
    CUDA_CHECK(cudaStreamDestroy(stream));
}

#ifdef LAB_BENCH_MAIN
/* --------------------------------------------------------------- the bench */

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --probe | --json FILE [--seed N] [--reps N] | --solve N [--reduction R]\n"
            "  --probe     print the GPU as JSON (exit 2 when there is none)\n"
            "  --json FILE time the launcher(s) on the lab's bench grid and write the figures to\n"
            "              FILE as one JSON object (FILE '-': standard output)\n"
            "  --solve N   labs with a solver (7): solve the model problem on an N x N grid until the\n"
            "              residual has fallen by R (default 1e-5); JSON on standard output\n",
            argv0);
    exit(64);
}

/* JSON string body: the device name has no quotes or backslashes in
 * practice, but escape them rather than write a broken file. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

static int probe_main(void)
{
    harness_device dev;
    char why[512];
    if (harness_probe(&dev, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        return 2;
    }
    printf("{\"name\": ");
    json_string(stdout, dev.name);
    printf(", \"cc\": \"%d.%d\", \"sm_count\": %d, \"l2_bytes\": %zu, \"global_mem_bytes\": %zu, "
           "\"mem_free_bytes\": %zu}\n",
           dev.cc_major, dev.cc_minor, dev.sm_count, dev.l2_bytes, dev.global_mem_bytes,
           dev.mem_free_bytes);
    return 0;
}

/* Halves the grid along its slowest dimension until the kind's device
 * arrays (and the host copies) fit; returns 1 when it had to. */
static int fit_grid(int *nx, int *ny, int *nz, const harness_device *dev, char *note, size_t n)
{
    const size_t reserve = 2 * dev->l2_bytes + ((size_t)512 << 20);
    int halved = 0;
    const int nx0 = *nx, ny0 = *ny, nz0 = *nz;
    for (;;) {
        const size_t bytes = (size_t)*nx * (size_t)*ny * (size_t)*nz * sizeof(float);
        if ((size_t)LAB_KIND.bench_arrays * bytes + reserve <= dev->mem_free_bytes)
            break;
        if (*nz > 1) *nz /= 2; else if (*ny > 1) *ny /= 2; else break;
        halved = 1;
    }
    if (halved)
        snprintf(note, n, "grid scaled down from %dx%dx%d to %dx%dx%d to fit %.1f GB of free GPU memory",
                 nx0, ny0, nz0, *nx, *ny, *nz, dev->mem_free_bytes / 1e9);
    return halved;
}

/* The yardstick, on two buffers of the bench grid's size, freed afterwards. */
static double copy_bandwidth(size_t n, int reps, cudaStream_t stream, double *memcpy_gbps,
                             double *kernel_gbps)
{
    float *d_src = harness_grid_alloc(n), *d_dst = harness_grid_alloc(n);
    harness_fill_random_device(d_src, n, 1, stream);
    harness_copy_bandwidth(d_src, d_dst, n, reps, stream, memcpy_gbps, kernel_gbps);
    harness_grid_free(d_src);
    harness_grid_free(d_dst);
    return *memcpy_gbps > *kernel_gbps ? *memcpy_gbps : *kernel_gbps;
}

/* What the timed calls of one launcher gave. */
typedef struct {
    double ms_median, ms_min, ms_max, bytes;
    int ok;
    char message[2048];
} timing;

enum { WARMUP_CALLS = 2 };

/*
 * Times launcher `which`: WARMUP_CALLS untimed calls, then `reps` timed ones.
 * Before every call, outside the timed window, the harness draws fresh input
 * values (a new seed per call) and poisons the outputs, then flushes the L2
 * cache; after every call it checks the output against its own GPU reference.
 * A launcher that skips work, or hands back an answer it kept from an earlier
 * call, fails that check.  The last call's output is then compared with the
 * CPU reference, every cell.
 */
static void time_launcher(lab_problem *p, int which, int reps, uint64_t seed, cudaStream_t stream,
                          harness_l2_flusher *flusher, timing *t)
{
    harness_timer timer;
    double *ms = malloc(sizeof(double) * (size_t)reps);
    if (!ms)
        harness_fail("out of host memory");
    harness_timer_init(&timer, stream);
    memset(t, 0, sizeof *t);
    t->ok = 1;
    for (int call = 0; call < WARMUP_CALLS + reps; call++) {
        LAB_KIND.refill(p, harness_mix_seed(seed, 1000 + 1000 * (uint64_t)which + (uint64_t)call), stream);
        harness_l2_flush(flusher, stream);
        harness_timer_start(&timer);
        LAB_KIND.launch(p, which, stream);
        const double elapsed = harness_timer_stop_ms(&timer);
        CUDA_CHECK_LAUNCH(stream, 1);
        char why[512] = "";
        if (LAB_KIND.gpu_check(p, which, stream, why, sizeof why) && t->ok) {
            t->ok = 0;
            snprintf(t->message, sizeof t->message, "%s, call %d of %d (fresh input each call): %s",
                     LAB_KIND.launchers[which], call + 1, WARMUP_CALLS + reps, why);
        }
        if (call >= WARMUP_CALLS)
            ms[call - WARMUP_CALLS] = elapsed;
    }
    if (t->ok) {
        harness_report rep;
        memset(&rep, 0, sizeof rep);
        rep.ok = 1;
        LAB_KIND.verify(p, which, &rep);
        t->ok = rep.ok;
        snprintf(t->message, sizeof t->message, "%s", rep.ok ? "every cell matches" : rep.message);
    }
    t->ms_min = harness_min(ms, reps);
    t->ms_max = harness_max(ms, reps);
    t->ms_median = harness_median(ms, reps);
    t->bytes = LAB_KIND.compulsory_bytes(p, which);
    harness_timer_free(&timer);
    free(ms);
}

int main(int argc, char **argv)
{
    const char *json_path = NULL;
    uint64_t seed = 0;
    int have_seed = 0, reps = LAB_BENCH_REPS, solve_n = 0;
    double reduction = 1e-5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--probe"))
            return probe_main();
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
        else
            usage(argv[0]);
    }
    if (solve_n) {
        if (!LAB_KIND.solve) {
            fprintf(stderr, "--solve: this lab (%s) has no solver\n", LAB_KIND.api);
            return 64;
        }
        if (!(reduction > 0 && reduction < 1)) {
            fprintf(stderr, "--reduction R needs 0 < R < 1, got %g\n", reduction);
            return 64;
        }
        harness_device dev;
        char why[512];
        if (harness_probe(&dev, why, sizeof why) != 0) {
            fprintf(stderr, "%s\n", why);
            return 2;
        }
        const long long limit = 40LL * solve_n * solve_n; /* Jacobi needs O(1/h^2) sweeps */
        return LAB_KIND.solve(solve_n, reduction, limit < 1000000 ? (int)limit : 1000000);
    }
    if (!json_path || reps < 1)
        usage(argv[0]);
    const int to_stdout = !strcmp(json_path, "-");
    FILE *say = to_stdout ? stderr : stdout; /* people's lines, never mixed into the JSON */
#ifdef STENCIL_DEBUG_BUILD
    fprintf(stderr, "this is a debug build (-G): its timings mean nothing; rebuild without DEBUG=1\n");
    return 4;
#endif
    harness_device dev;
    char why[512], note[256] = "";
    if (harness_probe(&dev, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        return 2;
    }
    if (!have_seed)
        seed = harness_fresh_seed();

    lab_case grid = { "bench", LAB_BENCH_NX, LAB_BENCH_NY, LAB_BENCH_NZ, LAB_BENCH_STEPS, LAB_MODE_CELLS };
    const int scaled = fit_grid(&grid.nx, &grid.ny, &grid.nz, &dev, note, sizeof note);
    if (scaled)
        fprintf(say, "note: %s\n", note);
    const size_t n = (size_t)grid.nx * (size_t)grid.ny * (size_t)grid.nz;

    cudaStream_t stream;
    harness_l2_flusher flusher;
    CUDA_CHECK(cudaStreamCreate(&stream));
    harness_l2_flusher_init(&flusher, &dev);
    double memcpy_gbps, kernel_gbps;
    const double copy_gbps = copy_bandwidth(n, reps, stream, &memcpy_gbps, &kernel_gbps);

    lab_problem *p = LAB_KIND.create(&grid, seed);
    timing t[LAB_MAX_LAUNCHERS];
    int output_ok = 1;
    double ms_median = 0, ms_min = 0, ms_max = 0, bytes = 0;
    const char *output_message = "every cell matches";
    for (int w = 0; w < LAB_KIND.nlaunchers; w++) {
        time_launcher(p, w, reps, seed, stream, &flusher, &t[w]);
        if (!t[w].ok && output_ok) {
            output_ok = 0;
            output_message = t[w].message;
        }
        ms_median += t[w].ms_median; ms_min += t[w].ms_min; ms_max += t[w].ms_max;
        bytes += t[w].bytes;
    }
    /* Several launchers (lab 7): the figures of one call of each, added up. */
    const double gbps = output_ok ? harness_gbps(bytes, ms_median) : 0.0;

    FILE *f = to_stdout ? stdout : fopen(json_path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", json_path);
        return 1;
    }
    fprintf(f, "{\"device\": ");
    json_string(f, dev.name);
    fprintf(f, ", \"cc\": \"%d.%d\", \"sm_count\": %d,\n", dev.cc_major, dev.cc_minor, dev.sm_count);
    fprintf(f, " \"nx\": %d, \"ny\": %d, \"nz\": %d, \"steps\": %d, \"scaled_down\": %s, \"note\": ",
            grid.nx, grid.ny, grid.nz, LAB_KIND.uses_steps ? grid.steps : 1, scaled ? "true" : "false");
    json_string(f, note);
    fprintf(f, ",\n \"array_bytes\": %zu, \"repetitions\": %d, \"ms_median\": %.6f, \"ms_min\": %.6f, "
               "\"ms_max\": %.6f,\n",
            n * sizeof(float), reps, output_ok ? ms_median : 0.0, output_ok ? ms_min : 0.0,
            output_ok ? ms_max : 0.0);
    fprintf(f, " \"bytes_compulsory\": %.0f, \"gbps\": %.3f, \"copy_gbps\": %.3f, "
               "\"copy_memcpy_gbps\": %.3f, \"copy_kernel_gbps\": %.3f, \"ratio\": %.4f,\n",
            bytes, gbps, copy_gbps, memcpy_gbps, kernel_gbps, gbps / copy_gbps);
    fprintf(f, " \"fresh_input_each_call\": true, \"calls_checked_on_gpu\": %d,\n",
            LAB_KIND.nlaunchers * (WARMUP_CALLS + reps));
    fprintf(f, " \"launchers\": [");
    for (int w = 0; w < LAB_KIND.nlaunchers; w++) {
        const double g = t[w].ok ? harness_gbps(t[w].bytes, t[w].ms_median) : 0.0;
        fprintf(f, "%s{\"name\": \"%s\", \"ms_median\": %.6f, \"bytes_compulsory\": %.0f, "
                   "\"gbps\": %.3f, \"ratio\": %.4f, \"output_ok\": %s}",
                w ? ", " : "", LAB_KIND.launchers[w], t[w].ms_median, t[w].bytes, g, g / copy_gbps,
                t[w].ok ? "true" : "false");
    }
    fprintf(f, "],\n \"output_ok\": %s, \"output_message\": ", output_ok ? "true" : "false");
    json_string(f, output_message);
    fprintf(f, ", \"seed\": %llu}\n", (unsigned long long)seed);
    if (!to_stdout)
        fclose(f);

    fprintf(say, "%s: %dx%dx%d%s, %d timed calls on fresh inputs: median %.3f ms, %.1f GB/s effective; "
                 "copy %.1f GB/s (memcpy %.1f, float4 kernel %.1f); ratio %.3f; output %s\n",
            dev.name, grid.nx, grid.ny, grid.nz, LAB_KIND.uses_steps ? " (several sweeps per call)" : "",
            reps, ms_median, gbps, copy_gbps, memcpy_gbps, kernel_gbps, gbps / copy_gbps,
            output_ok ? "ok" : output_message);

    LAB_KIND.destroy(p);
    harness_l2_flusher_free(&flusher);
    CUDA_CHECK(cudaStreamDestroy(stream));
    return 0;
}
#endif /* LAB_BENCH_MAIN */
