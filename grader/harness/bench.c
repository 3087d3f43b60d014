/*
 * bench.c -- the timed run of every lab: it times the student's launcher(s)
 * on the lab's bench grid and writes the figures as one JSON object.
 *
 * Two programs run it (lab_driver.h, lab_bench_run): the check program
 * itself once every case has passed, when the grader asks for it
 * (check_runner.c: one CUDA start per grading instead of two), and the bench
 * program (bench_main.c: `bench --json FILE`, what the grader uses after a
 * check run in fork mode, and the profilers, the tour and the solver).  Exit statuses and JSON keys are protocol.h's (generated from the
 * grader's protocol.py); grader/README.md, section "Bench", says what each
 * key means.
 *
 * What a timed run does, in order:
 *   1. the copy bandwidth of this GPU, the yardstick of every score
 *      (harness_copy_bandwidth), on two grids of the bench grid's size;
 *   2. per launcher, calls on fresh input values drawn on the GPU (a new seed
 *      each call), with the outputs poisoned and the L2 cache flushed before
 *      each, outside the timed interval: two untimed warm-up calls, then timed
 *      calls until there are at least LAB_BENCH_MIN_REPS and the median's 95%
 *      confidence interval lies within LAB_BENCH_PRECISION of it, or
 *      LAB_BENCH_REPS were made;
 *   3. after every call, the whole device synchronised, the output checked
 *      against the harness's own GPU reference of that call's input;
 *   4. the launch audit (audit.h): both warm-up calls, and after each timed
 *      call one more untimed call with probability AUDIT_PROBABILITY, drawn
 *      so that the launcher cannot tell which calls are audited;
 *   5. for a kind that asks for bitwise determinism (lab 7), REPEAT_CALLS
 *      untimed calls on the first timed call's input, compared bit for bit.
 * Every call of a launcher is bracketed by harness_launcher_begin/end
 * (launch_guard.c): a launch the runtime refuses names the launcher and what
 * it asked for.
 * The timer covers every stream a launcher can reach (device.cu).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "channel.h"
#include "lab_driver.h"
#include "lab_kind.h"
#include "protocol.h"

enum { WARMUP_CALLS = 2 };
/* Untimed repeats of the first timed call's input for a kind that asks for determinism: a sum
 * whose order depends on timing differs between two runs nearly always; three make an escape by
 * chance rarer still, for well under a millisecond each on the bench's grid. */
enum { REPEAT_CALLS = 3 };
/* Chance that a timed call is followed by an audited one. */
static const double AUDIT_PROBABILITY = 0.25;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int lab_find_gpu(harness_device *dev)
{
    char why[512];
    if (harness_probe(dev, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        return -1;
    }
    return 0;
}

void lab_device_json(json_writer *w, const harness_device *dev)
{
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", dev->cc_major, dev->cc_minor);
    json_string(w, KEY_device, dev->name);        /* the same keys as KEY_probe_device, ... */
    json_string(w, KEY_cc, cc);
    json_integer(w, KEY_sm_count, dev->sm_count);
}

/* Device memory the bench leaves free besides the kind's grids and the L2 flusher (2 x L2):
 * the CUDA context's own allocations (the kernels' local memory, the printf buffer, the module
 * images), CUPTI's activity buffers and the allocator's rounding of each grid. */
static const size_t HEADROOM_BYTES = (size_t)512 << 20;

/* Halves the grid along its slowest dimension until the kind's device
 * arrays fit beside the L2 flusher; returns 1 when it had to. */
static int fit_grid(lab_case *g, const harness_device *dev, char *note, size_t n)
{
    const size_t reserve = 2 * dev->l2_bytes + HEADROOM_BYTES;
    int halved = 0;
    const int nx0 = g->nx, ny0 = g->ny, nz0 = g->nz;
    for (;;) {
        const size_t bytes = (size_t)g->nx * (size_t)g->ny * (size_t)g->nz * sizeof(float);
        if ((size_t)LAB_KIND.bench_arrays * bytes + reserve <= dev->mem_free_bytes)
            break;
        if (g->nz > 1) g->nz /= 2; else if (g->ny > 1) g->ny /= 2; else break;
        halved = 1;
    }
    if (halved)
        snprintf(note, n, "grid scaled down from %dx%dx%d to %dx%dx%d to fit %.1f GB of free GPU memory",
                 nx0, ny0, nz0, g->nx, g->ny, g->nz, dev->mem_free_bytes / 1e9);
    return halved;
}

/* The yardstick, on two grids of the bench grid's size, freed afterwards. */
static double copy_bandwidth(size_t n, cudaStream_t stream, double *memcpy_gbps, double *kernel_gbps)
{
    float *d_src = harness_grid_alloc(n), *d_dst = harness_grid_alloc(n);
    harness_fill_random_device(d_src, n, 1, stream);
    harness_copy_bandwidth(d_src, d_dst, n, LAB_BENCH_MIN_REPS, stream, memcpy_gbps, kernel_gbps);
    harness_grid_free(d_src);
    harness_grid_free(d_dst);
    return *memcpy_gbps > *kernel_gbps ? *memcpy_gbps : *kernel_gbps;
}

/* ------------------------------------------------------------ timed calls */

/* What the calls of one launcher gave. */
typedef struct {
    double ms_median, ms_min, ms_max, precision, bytes;
    int reps, checked, ok;
    int repeats, repeats_identical;     /* untimed repeats of the first timed call (repeat_calls) */
    char message[2048];
} timing;

typedef struct {
    lab_problem *p;
    cudaStream_t stream;
    harness_l2_flusher *flusher;
    harness_timer timer;
    audit_log *audit;
    uint64_t seed, audit_state;     /* input seeds; the audit's own draws */
    uint64_t call_seed;             /* the input seed of the latest call */
    int calls;                      /* every call so far, for fresh seeds */
} bench_state;

/* xorshift64*: the audit's coin, seeded from /dev/urandom, never from the input seed. */
static double audit_coin(bench_state *b)
{
    b->audit_state ^= b->audit_state >> 12;
    b->audit_state ^= b->audit_state << 25;
    b->audit_state ^= b->audit_state >> 27;
    return (double)((b->audit_state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * One call of launcher `which`, checked on the GPU afterwards: on fresh input, or, with
 * `input` not NULL, on the input drawn from that seed again (a repeat).
 * mode 'T': timed (returns the milliseconds); 'A': audited; 'W': neither.
 */
static double one_call(bench_state *b, int which, char mode, timing *t, const uint64_t *input)
{
    const int call = b->calls++;
    b->call_seed = input ? *input : harness_mix_seed(b->seed, 1000 + 1000 * (uint64_t)which + (uint64_t)call);
    LAB_KIND.refill(b->p, b->call_seed, b->stream);
    harness_l2_flush(b->flusher, b->stream);
    double ms = 0.0;
    harness_launcher_begin(KIND_LAUNCHERS[which]);
    if (mode == 'T') {
        harness_timer_start(&b->timer);
        LAB_KIND.launch(b->p, which, b->stream);
        ms = harness_timer_stop_ms(&b->timer);
    } else if (mode == 'A' && b->audit->available) {
        audit_begin(b->stream);
        LAB_KIND.launch(b->p, which, b->stream);
        audit_end_into(b->audit, which);
    } else {
        LAB_KIND.launch(b->p, which, b->stream);
    }
    harness_launcher_end(b->stream, 1);
    CUDA_CHECK(cudaDeviceSynchronize());      /* whatever stream the launcher used */
    char why[512] = "";
    t->checked++;
    if (LAB_KIND.gpu_check(b->p, which, b->stream, why, sizeof why) && t->ok) {
        t->ok = 0;
        snprintf(t->message, sizeof t->message, "%s, call %d (%s): %s", KIND_LAUNCHERS[which], t->checked,
                 input ? "a repeat of the first timed call's input" : "fresh input each call", why);
    }
    return ms;
}

/*
 * A kind whose launcher must give the same bits on every run (LAB_KIND.digest: lab 7's
 * residual and Jacobi sweep) gets REPEAT_CALLS untimed calls on the first timed call's
 * input after its timed calls, on the bench's grid: each call's output digest must equal
 * the first timed call's.  (The Check suite's determinism cases see only small grids; a
 * sum that turns to floating-point atomics on large ones would pass them.)
 */
static void repeat_calls(bench_state *b, int which, uint64_t first_seed, uint64_t first_digest, timing *t)
{
    for (int r = 0; r < REPEAT_CALLS; r++) {
        one_call(b, which, 'W', t, &first_seed);
        const uint64_t digest = LAB_KIND.digest(b->p, which, b->stream);
        t->repeats++;
        if (digest != first_digest && t->repeats_identical) {
            t->repeats_identical = 0;
            if (t->ok) {
                t->ok = 0;
                snprintf(t->message, sizeof t->message,
                         "%s is not deterministic on the bench's grid: repeat %d of the first timed call, on "
                         "the same input, gave other bits (digest %016llx, first %016llx); the API asks for "
                         "the same bits on every run, so the order of floating-point additions must not "
                         "depend on timing (no floating-point atomics)", KIND_LAUNCHERS[which], r + 1,
                         (unsigned long long)digest, (unsigned long long)first_digest);
            }
        }
    }
}

static void time_launcher(bench_state *b, int which, int max_reps, double cells, int steps, timing *t)
{
    double *ms = malloc(sizeof(double) * (size_t)max_reps), *sorted = malloc(sizeof(double) * (size_t)max_reps);
    if (!ms || !sorted)
        harness_fail("out of host memory");
    memset(t, 0, sizeof *t);
    t->ok = t->repeats_identical = 1;
    for (int w = 0; w < WARMUP_CALLS; w++)
        one_call(b, which, 'A', t, NULL);
    const int min_reps = LAB_BENCH_MIN_REPS < max_reps ? LAB_BENCH_MIN_REPS : max_reps;
    int n = 0;
    double lo = 0, hi = 0;
    uint64_t first_seed = 0, first_digest = 0;
    while (n < max_reps) {
        ms[n++] = one_call(b, which, 'T', t, NULL);
        if (n == 1 && LAB_KIND.digest) {       /* before any other call overwrites its output */
            first_seed = b->call_seed;
            first_digest = LAB_KIND.digest(b->p, which, b->stream);
        }
        if (audit_coin(b) < AUDIT_PROBABILITY)
            one_call(b, which, 'A', t, NULL);
        if (n >= min_reps) {
            memcpy(sorted, ms, sizeof(double) * (size_t)n);
            const double median = harness_median_ci(sorted, n, &lo, &hi);
            t->precision = median > 0 ? (hi - lo) / 2.0 / median : 0.0;
            if (t->precision <= LAB_BENCH_PRECISION)
                break;
        }
    }
    if (LAB_KIND.digest)
        repeat_calls(b, which, first_seed, first_digest, t);
    if (t->ok)
        snprintf(t->message, sizeof t->message, "every call matches the harness's GPU reference");
    t->reps = n;
    t->ms_min = harness_min(ms, n);
    t->ms_max = harness_max(ms, n);
    memcpy(sorted, ms, sizeof(double) * (size_t)n);
    t->ms_median = harness_median_ci(sorted, n, &lo, &hi);
    t->precision = t->ms_median > 0 ? (hi - lo) / 2.0 / t->ms_median : 0.0;
    t->bytes = lab_compulsory_bytes(which, cells, steps);
    free(ms);
    free(sorted);
}

int lab_bench_run(FILE *out, uint64_t seed, int max_reps, int audit_wanted)
{
#ifdef STENCIL_DEBUG_BUILD
    (void)out; (void)seed; (void)max_reps; (void)audit_wanted;
    fprintf(stderr, "this is a debug build (-G): its timings mean nothing; rebuild without DEBUG=1\n");
    return EXIT_DEBUG_BUILD;
#else
    const double t0 = now_s();
    harness_device dev;
    if (lab_find_gpu(&dev) != 0)
        return EXIT_NO_GPU;
    static audit_log audit;
    audit.available = 0;
    if (!audit_wanted)
        snprintf(audit.message, sizeof audit.message, "not asked for (--no-audit)");
    else if (audit_init(audit.message, sizeof audit.message) == 0)
        audit.available = 1;
    const double t_context = now_s();

    char note[256] = "";
    lab_case grid = { "bench", LAB_BENCH_NX, LAB_BENCH_NY, LAB_BENCH_NZ, LAB_BENCH_STEPS, LAB_MODE_CELLS };
    const int scaled = fit_grid(&grid, &dev, note, sizeof note);
    const size_t n = (size_t)grid.nx * (size_t)grid.ny * (size_t)grid.nz;

    bench_state b;
    memset(&b, 0, sizeof b);
    harness_l2_flusher flusher;
    CUDA_CHECK(cudaStreamCreate(&b.stream));
    harness_l2_flusher_init(&flusher, &dev);
    double memcpy_gbps, kernel_gbps;
    const double copy_gbps = copy_bandwidth(n, b.stream, &memcpy_gbps, &kernel_gbps);
    const double t_copy = now_s();

    b.p = LAB_KIND.create(&grid, seed, LAB_FOR_BENCH);
    b.flusher = &flusher;
    b.audit = &audit;
    b.seed = seed;
    b.audit_state = harness_fresh_seed() | 1;
    harness_timer_init(&b.timer, b.stream);
    timing t[KIND_NLAUNCHERS];
    int output_ok = 1, reps = 0, checked = 0;
    double ms_median = 0, ms_min = 0, ms_max = 0, bytes = 0, precision = 0;
    const char *output_message = "every call matches the harness's GPU reference";
    for (int w = 0; w < KIND_NLAUNCHERS; w++) {
        time_launcher(&b, w, max_reps, (double)n, grid.steps, &t[w]);
        if (!t[w].ok && output_ok) {
            output_ok = 0;
            output_message = t[w].message;
        }
        ms_median += t[w].ms_median; ms_min += t[w].ms_min; ms_max += t[w].ms_max;
        bytes += t[w].bytes;
        reps = w == 0 || t[w].reps < reps ? t[w].reps : reps;
        precision = t[w].precision > precision ? t[w].precision : precision;
        checked += t[w].checked;
    }
    const double t_timed = now_s();
    /* Several launchers (lab 7): the figures of one call of each, added up. */
    const double gbps = output_ok ? harness_gbps(bytes, ms_median) : 0.0;

    json_writer jw;
    json_begin(&jw, out);
    lab_device_json(&jw, &dev);
    json_integer(&jw, KEY_nx, grid.nx);
    json_integer(&jw, KEY_ny, grid.ny);
    json_integer(&jw, KEY_nz, grid.nz);
    json_integer(&jw, KEY_steps, KIND_MULTI_STEP ? grid.steps : 1);
    json_bool(&jw, KEY_scaled_down, scaled);
    json_string(&jw, KEY_note, note);
    json_integer(&jw, KEY_array_bytes, (long long)(n * sizeof(float)));
    json_integer(&jw, KEY_repetitions, reps);
    json_number(&jw, KEY_precision, precision);
    json_number(&jw, KEY_ms_median, output_ok ? ms_median : 0.0);
    json_number(&jw, KEY_ms_min, output_ok ? ms_min : 0.0);
    json_number(&jw, KEY_ms_max, output_ok ? ms_max : 0.0);
    json_number(&jw, KEY_bytes_compulsory, bytes);
    json_number(&jw, KEY_gbps, gbps);
    json_number(&jw, KEY_copy_gbps, copy_gbps);
    json_number(&jw, KEY_copy_memcpy_gbps, memcpy_gbps);
    json_number(&jw, KEY_copy_kernel_gbps, kernel_gbps);
    json_number(&jw, KEY_ratio, gbps / copy_gbps);
    json_bool(&jw, KEY_output_ok, output_ok);
    json_string(&jw, KEY_output_message, output_message);
    json_integer(&jw, KEY_calls_checked_on_gpu, checked);
    json_open_array(&jw, KEY_launchers);
    for (int w = 0; w < KIND_NLAUNCHERS; w++) {
        const double g = t[w].ok ? harness_gbps(t[w].bytes, t[w].ms_median) : 0.0;
        json_open_object(&jw, NULL);
        json_string(&jw, KEY_launcher_name, KIND_LAUNCHERS[w]);
        json_integer(&jw, KEY_launcher_repetitions, t[w].reps);
        json_number(&jw, KEY_launcher_ms_median, t[w].ms_median);
        json_number(&jw, KEY_launcher_precision, t[w].precision);
        json_number(&jw, KEY_launcher_bytes_compulsory, t[w].bytes);
        json_number(&jw, KEY_launcher_gbps, g);
        json_number(&jw, KEY_launcher_ratio, g / copy_gbps);
        json_bool(&jw, KEY_launcher_output_ok, t[w].ok);
        json_integer(&jw, KEY_launcher_repeats, t[w].repeats);
        json_bool(&jw, KEY_launcher_repeats_identical, t[w].repeats_identical);
        json_close(&jw);
    }
    json_close(&jw);
    audit_write(&jw, &audit, KIND_LAUNCHERS);
    json_open_object(&jw, KEY_seconds);
    json_number(&jw, KEY_seconds_context, t_context - t0);
    json_number(&jw, KEY_seconds_copy_probe, t_copy - t_context);
    json_number(&jw, KEY_seconds_calls, t_timed - t_copy);
    json_number(&jw, KEY_seconds_total, now_s() - t0);
    json_close(&jw);
    json_integer(&jw, KEY_seed, (long long)seed);
    json_end(&jw);

    harness_timer_free(&b.timer);
    LAB_KIND.destroy(b.p);
    harness_l2_flusher_free(&flusher);
    CUDA_CHECK(cudaStreamDestroy(b.stream));
    return EXIT_OK;
#endif
}
