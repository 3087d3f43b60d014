/*
 * lab_driver.c -- one lab's problem: inputs, the student's launcher, the CPU
 * reference, and the two programs built on them (lab_verify for the Check
 * suite, main() of the bench when compiled with -DLAB_BENCH_MAIN).
 *
 * Compiled once per lab build with that build's lab_config.h (generated from
 * lab.json), which defines exactly one LAB_API_* macro: this file is the only
 * place that names the student's launcher.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_config.h"
#include "lab_driver.h"

#if defined(LAB_API_STENCIL2D_SWEEP)
#define DIRICHLET_DIMS 2
#elif defined(LAB_API_STENCIL2D_PERIODIC_SWEEP)
#define DIRICHLET_DIMS 0
#elif defined(LAB_API_STENCIL2D_RUN)
#define DIRICHLET_DIMS 2
#define TIME_STEPS 1 /* the launcher runs several sweeps and may overwrite its input */
#elif defined(LAB_API_STENCIL3D_SWEEP)
#define DIRICHLET_DIMS 3
#else
#error "lab_config.h names no launcher this driver knows (LAB_API_...)"
#endif

#ifndef TIME_STEPS
#define TIME_STEPS 0
#endif

/* One problem instance: host and device grids of n cells and the weights. */
typedef struct {
    int nx, ny, nz, steps;
    size_t n;
    stencil2d_coeffs c2;
    stencil3d_coeffs c3;
    float *h_in, *h_ref, *h_got;
    float *d_in, *d_out; /* lab 4: d_a and d_b */
} problem;

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        harness_fail("out of host memory: %zu bytes requested", bytes);
    return p;
}

static void problem_init(problem *p, int nx, int ny, int nz, int steps, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->nx = nx; p->ny = ny; p->nz = nz; p->steps = steps;
    p->n = (size_t)nx * (size_t)ny * (size_t)nz;
    p->c2 = harness_coeffs2d(harness_mix_seed(seed, 1));
    p->c3 = harness_coeffs3d(harness_mix_seed(seed, 1));
    p->h_in = xmalloc(p->n * sizeof(float));
    p->h_ref = xmalloc(p->n * sizeof(float));
    p->h_got = xmalloc(p->n * sizeof(float));
    harness_fill_random(p->h_in, p->n, harness_mix_seed(seed, 2));
    p->d_in = harness_grid_alloc(p->n);
    p->d_out = harness_grid_alloc(p->n);
    CUDA_CHECK(cudaMemcpy(p->d_in, p->h_in, p->n * sizeof(float), cudaMemcpyHostToDevice));
}

static void problem_free(problem *p)
{
    harness_grid_free(p->d_in);
    harness_grid_free(p->d_out);
    free(p->h_in); free(p->h_ref); free(p->h_got);
}

/* The CPU reference result into h_ref. */
static void problem_reference(problem *p)
{
#if defined(LAB_API_STENCIL2D_SWEEP)
    cpu_stencil2d_sweep(p->h_in, p->h_ref, p->nx, p->ny, p->c2);
#elif defined(LAB_API_STENCIL2D_PERIODIC_SWEEP)
    cpu_stencil2d_periodic_sweep(p->h_in, p->h_ref, p->nx, p->ny, p->c2);
#elif defined(LAB_API_STENCIL2D_RUN)
    float *tmp = xmalloc(p->n * sizeof(float));
    memcpy(p->h_ref, p->h_in, p->n * sizeof(float));
    if (cpu_stencil2d_run(p->h_ref, tmp, p->nx, p->ny, p->c2, p->steps) != p->h_ref)
        memcpy(p->h_ref, tmp, p->n * sizeof(float));
    free(tmp);
#elif defined(LAB_API_STENCIL3D_SWEEP)
    cpu_stencil3d_sweep(p->h_in, p->h_ref, p->nx, p->ny, p->nz, p->c3);
#endif
}

/* Calls the student's launcher once; returns the device grid holding the
 * result, or NULL (lab 4) when the launcher returned neither buffer. */
static const float *problem_launch(problem *p, cudaStream_t stream)
{
#if defined(LAB_API_STENCIL2D_SWEEP)
    stencil2d_sweep(p->d_in, p->d_out, p->nx, p->ny, p->c2, stream);
    return p->d_out;
#elif defined(LAB_API_STENCIL2D_PERIODIC_SWEEP)
    stencil2d_periodic_sweep(p->d_in, p->d_out, p->nx, p->ny, p->c2, stream);
    return p->d_out;
#elif defined(LAB_API_STENCIL2D_RUN)
    const float *r = stencil2d_run(p->d_in, p->d_out, p->nx, p->ny, p->c2, p->steps, stream);
    return r == p->d_in || r == p->d_out ? r : NULL;
#elif defined(LAB_API_STENCIL3D_SWEEP)
    stencil3d_sweep(p->d_in, p->d_out, p->nx, p->ny, p->nz, p->c3, stream);
    return p->d_out;
#endif
}

void lab_case_label(const lab_case *c, char *buf, size_t n)
{
    int used = snprintf(buf, n, "nx=%d ny=%d", c->nx, c->ny);
    if (c->nz > 1 && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " nz=%d", c->nz);
    if (TIME_STEPS && used >= 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " steps=%d", c->steps);
}

void lab_verify(const lab_case *c, uint64_t seed, harness_report *r)
{
    const harness_tolerance tol = { LAB_RTOL, LAB_ATOL };
    problem p;
    cudaStream_t stream;
    memset(r, 0, sizeof *r);
    r->ok = 1;
    problem_init(&p, c->nx, c->ny, c->nz > 0 ? c->nz : 1, c->steps, seed);
    CUDA_CHECK(cudaStreamCreate(&stream));
    harness_poison(p.d_out, p.n, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    const float *d_result = problem_launch(&p, stream);
    CUDA_CHECK_LAUNCH(stream, 1);
    problem_reference(&p);

    if (!d_result) {
        r->ok = 0;
        snprintf(r->message, sizeof r->message,
                 "stencil2d_run returned a pointer that is neither d_a nor d_b");
    } else {
        CUDA_CHECK(cudaMemcpy(p.h_got, d_result, p.n * sizeof(float), cudaMemcpyDeviceToHost));
        harness_compare(p.h_got, p.h_ref, p.nx, p.ny, p.nz, tol, DIRICHLET_DIMS, r);
    }
    harness_guards_intact(p.d_out, p.n, TIME_STEPS ? "d_b" : "the output grid", r);
    harness_guards_intact(p.d_in, p.n, TIME_STEPS ? "d_a" : "the input grid", r);
    if (!TIME_STEPS) {
        CUDA_CHECK(cudaMemcpy(p.h_got, p.d_in, p.n * sizeof(float), cudaMemcpyDeviceToHost));
        harness_unchanged(p.h_got, p.h_in, p.nx, p.ny, p.nz, "the input grid", r);
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
    problem_free(&p);
}

#ifdef LAB_BENCH_MAIN
/* --------------------------------------------------------------- the bench */
/* Bytes the problem must move per launcher call: each cell read once and
 * written once per sweep. */
static double problem_compulsory_bytes(const problem *p)
{
    const double sweeps = TIME_STEPS ? p->steps : 1;
    return sweeps * 2.0 * (double)p->n * sizeof(float);
}


static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --probe | --json FILE [--seed N] [--reps N]\n"
            "  --probe     print the GPU as JSON (exit 2 when there is none)\n"
            "  --json FILE time the launcher on the lab's bench grid, write the figures to FILE\n",
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

/* Halves the grid along its slowest dimension until the device buffers (and
 * the host copies) fit; returns 1 when it had to. */
static int fit_grid(int *nx, int *ny, int *nz, const harness_device *dev, char *note, size_t n)
{
    const int arrays = TIME_STEPS ? 3 : 2; /* input, output (lab 4: + pristine input) */
    const size_t reserve = 2 * dev->l2_bytes + ((size_t)512 << 20);
    int halved = 0;
    const int nx0 = *nx, ny0 = *ny, nz0 = *nz;
    for (;;) {
        const size_t bytes = (size_t)*nx * (size_t)*ny * (size_t)*nz * sizeof(float);
        if (arrays * bytes + reserve <= dev->mem_free_bytes)
            break;
        if (*nz > 1) *nz /= 2; else if (*ny > 1) *ny /= 2; else break;
        halved = 1;
    }
    if (halved)
        snprintf(note, n, "grid scaled down from %dx%dx%d to %dx%dx%d to fit %.1f GB of free GPU memory",
                 nx0, ny0, nz0, *nx, *ny, *nz, dev->mem_free_bytes / 1e9);
    return halved;
}

int main(int argc, char **argv)
{
    const char *json_path = NULL;
    uint64_t seed = 0;
    int have_seed = 0, reps = LAB_BENCH_REPS;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--probe"))
            return probe_main();
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10), have_seed = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else
            usage(argv[0]);
    }
    if (!json_path || reps < 1)
        usage(argv[0]);
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

    int nx = LAB_BENCH_NX, ny = LAB_BENCH_NY, nz = LAB_BENCH_NZ;
    const int scaled = fit_grid(&nx, &ny, &nz, &dev, note, sizeof note);
    if (scaled)
        printf("note: %s\n", note);

    problem p;
    cudaStream_t stream;
    harness_l2_flusher flusher;
    harness_timer timer;
    problem_init(&p, nx, ny, nz, LAB_BENCH_STEPS, seed);
    CUDA_CHECK(cudaStreamCreate(&stream));
    harness_l2_flusher_init(&flusher, &dev);
    harness_timer_init(&timer, stream);

    /* The yardstick, measured on the same buffers in the same run. */
    double memcpy_gbps, kernel_gbps;
    harness_copy_bandwidth(p.d_in, p.d_out, p.n, reps, stream, &memcpy_gbps, &kernel_gbps);
    const double copy_gbps = memcpy_gbps > kernel_gbps ? memcpy_gbps : kernel_gbps;

    float *d_init = NULL; /* lab 4 overwrites its input: restore it before each call */
    if (TIME_STEPS) {
        d_init = harness_grid_alloc(p.n);
        CUDA_CHECK(cudaMemcpy(d_init, p.h_in, p.n * sizeof(float), cudaMemcpyHostToDevice));
    }

    double *ms = xmalloc(sizeof(double) * (size_t)reps);
    char output_message[2048] = "";
    int output_ok = 1;
    const float *d_result = NULL;
    for (int r = -2; r < reps; r++) { /* r < 0: warm-up calls, not recorded */
        if (TIME_STEPS)
            CUDA_CHECK(cudaMemcpyAsync(p.d_in, d_init, p.n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream));
        harness_poison(p.d_out, p.n, stream);
        harness_l2_flush(&flusher, stream);
        harness_timer_start(&timer);
        d_result = problem_launch(&p, stream);
        const double t = harness_timer_stop_ms(&timer);
        CUDA_CHECK_LAUNCH(stream, 1);
        if (!d_result) {
            output_ok = 0;
            snprintf(output_message, sizeof output_message,
                     "stencil2d_run returned a pointer that is neither d_a nor d_b");
            break;
        }
        const size_t nan = harness_count_nan(d_result, p.n, stream);
        if (nan && output_ok) {
            output_ok = 0;
            snprintf(output_message, sizeof output_message,
                     "call %d of the timed loop left %zu cells unwritten (NaN poison): work was skipped",
                     r + 3, nan);
        }
        if (r >= 0)
            ms[r] = t;
    }

    if (output_ok) { /* the last timed call's output, every cell */
        harness_report rep;
        const harness_tolerance tol = { LAB_RTOL, LAB_ATOL };
        memset(&rep, 0, sizeof rep);
        rep.ok = 1;
        CUDA_CHECK(cudaMemcpy(p.h_got, d_result, p.n * sizeof(float), cudaMemcpyDeviceToHost));
        problem_reference(&p);
        output_ok = harness_compare(p.h_got, p.h_ref, p.nx, p.ny, p.nz, tol, DIRICHLET_DIMS, &rep);
        snprintf(output_message, sizeof output_message, "%s", rep.ok ? "every cell matches" : rep.message);
    }

    const double ms_median = output_ok ? harness_median(ms, reps) : 0.0;
    const double bytes = problem_compulsory_bytes(&p);
    const double gbps = output_ok ? harness_gbps(bytes, ms_median) : 0.0;

    FILE *f = fopen(json_path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", json_path);
        return 1;
    }
    fprintf(f, "{\"device\": ");
    json_string(f, dev.name);
    fprintf(f, ", \"cc\": \"%d.%d\", \"sm_count\": %d,\n", dev.cc_major, dev.cc_minor, dev.sm_count);
    fprintf(f, " \"nx\": %d, \"ny\": %d, \"nz\": %d, \"steps\": %d, \"scaled_down\": %s, \"note\": ",
            p.nx, p.ny, p.nz, TIME_STEPS ? p.steps : 1, scaled ? "true" : "false");
    json_string(f, note);
    fprintf(f, ",\n \"array_bytes\": %zu, \"repetitions\": %d, \"ms_median\": %.6f, \"ms_min\": %.6f, "
               "\"ms_max\": %.6f,\n",
            p.n * sizeof(float), reps, ms_median, output_ok ? harness_min(ms, reps) : 0.0,
            output_ok ? harness_max(ms, reps) : 0.0);
    fprintf(f, " \"bytes_compulsory\": %.0f, \"gbps\": %.3f, \"copy_gbps\": %.3f, "
               "\"copy_memcpy_gbps\": %.3f, \"copy_kernel_gbps\": %.3f, \"ratio\": %.4f,\n",
            bytes, gbps, copy_gbps, memcpy_gbps, kernel_gbps, gbps / copy_gbps);
    fprintf(f, " \"output_ok\": %s, \"output_message\": ", output_ok ? "true" : "false");
    json_string(f, output_message);
    fprintf(f, ", \"seed\": %llu}\n", (unsigned long long)seed);
    fclose(f);

    printf("%s: %dx%dx%d%s, %d timed calls: median %.3f ms, %.1f GB/s effective; "
           "copy %.1f GB/s (memcpy %.1f, float4 kernel %.1f); ratio %.3f; output %s\n",
           dev.name, p.nx, p.ny, p.nz, TIME_STEPS ? " (several sweeps per call)" : "", reps, ms_median,
           gbps, copy_gbps, memcpy_gbps, kernel_gbps, gbps / copy_gbps, output_ok ? "ok" : output_message);

    free(ms);
    harness_grid_free(d_init);
    harness_timer_free(&timer);
    harness_l2_flusher_free(&flusher);
    CUDA_CHECK(cudaStreamDestroy(stream));
    problem_free(&p);
    return 0;
}
#endif /* LAB_BENCH_MAIN */
