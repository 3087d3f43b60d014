/*
 * jacobi_residual.c -- the kind of lab 7: a Jacobi solver for the Poisson
 * equation laplace(u) = f on an nx-by-ny grid of spacing h, Dirichlet
 * boundary.  Two launchers (stencil_lab.h):
 *
 *   0  residual_norm2(u, f) -> sum of r^2 over the interior, one device double,
 *      r = f - (u[x-1] + u[x+1] + u[y-1] + u[y+1] - 4u) / h^2;
 *   1  jacobi_sweep(u, f) -> unew = (u[x-1] + u[x+1] + u[y-1] + u[y+1] - h^2 f) / 4,
 *      boundary copied.
 *
 * Besides the every-cell cases of lab_driver.c, this kind runs two modes of
 * its own (run_case): determinism (the same inputs `steps` times, then once
 * more on buffers at other addresses: every bit of the sum equal) and
 * convergence (the model problem below: the rate cos(pi h) per sweep, and on
 * small grids the converged solution against the analytic one).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "lab_config.h"
#include "lab_kind.h"
#include "protocol.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const harness_tolerance TOLERANCE = { LAB_RTOL, LAB_ATOL };

struct lab_problem {
    int nx, ny;
    size_t n;
    float h;
    uint64_t input_seed;       /* u from mix(seed, 1), f from mix(seed, 2) */
    float *h_u, *h_f, *h_want, *h_got;
    float *d_u, *d_f, *d_unew;
    double *d_result;          /* a guarded grid of 2 floats: one double */
    float *d_scratch;          /* the harness's Jacobi reference (bench only) */
    double *d_ref_result;
};

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        harness_fail("out of host memory: %zu bytes requested", bytes);
    return p;
}

/* The grid spacing of a random case: in [0.5, 1), so that f and the h^2
 * factor both weigh in r and in unew (a launcher that drops either fails). */
static float random_spacing(uint64_t seed)
{
    float unit;
    harness_fill_random(&unit, 1, harness_mix_seed(seed, 3));
    return 0.75f + 0.25f * unit;
}

static void poison_outputs(lab_problem *p, cudaStream_t s)
{
    harness_poison(p->d_unew, p->n, s);
    harness_poison((float *)p->d_result, 2, s);
}

/* A problem's buffers; host copies only for the Check cases (host != 0). */
static lab_problem *alloc_problem(int nx, int ny, float h, int host)
{
    lab_problem *p = xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->nx = nx; p->ny = ny; p->h = h;
    p->n = (size_t)nx * (size_t)ny;
    if (host) {
        p->h_u = xmalloc(p->n * sizeof(float));
        p->h_f = xmalloc(p->n * sizeof(float));
        p->h_want = xmalloc(p->n * sizeof(float));
        p->h_got = xmalloc(p->n * sizeof(float));
    }
    p->d_u = harness_grid_alloc(p->n);
    p->d_f = harness_grid_alloc(p->n);
    p->d_unew = harness_grid_alloc(p->n);
    p->d_result = (double *)harness_grid_alloc(2);
    return p;
}

/* Host inputs to the device, outputs poisoned; synchronous. */
static void upload(lab_problem *p)
{
    CUDA_CHECK(cudaMemcpy(p->d_u, p->h_u, p->n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p->d_f, p->h_f, p->n * sizeof(float), cudaMemcpyHostToDevice));
    poison_outputs(p, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void refill(lab_problem *p, uint64_t seed, cudaStream_t s);

static lab_problem *create(const lab_case *c, uint64_t seed, int for_bench)
{
    lab_problem *p = alloc_problem(c->nx, c->ny, random_spacing(seed), for_bench != LAB_FOR_BENCH);
    p->input_seed = harness_mix_seed(seed, 2);
    if (for_bench == LAB_FOR_BENCH) {        /* the same values, drawn on the device */
        refill(p, p->input_seed, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        return p;
    }
    harness_fill_random(p->h_u, p->n, harness_mix_seed(p->input_seed, 1));
    harness_fill_random(p->h_f, p->n, harness_mix_seed(p->input_seed, 2));
    upload(p);
    return p;
}

static void destroy(lab_problem *p)
{
    if (!p)
        return;
    harness_grid_free(p->d_u);
    harness_grid_free(p->d_f);
    harness_grid_free(p->d_unew);
    harness_grid_free((float *)p->d_result);
    if (p->d_scratch)
        CUDA_CHECK(cudaFree(p->d_scratch));
    if (p->d_ref_result)
        CUDA_CHECK(cudaFree(p->d_ref_result));
    free(p->h_u); free(p->h_f); free(p->h_want); free(p->h_got);
    free(p);
}

static void refill(lab_problem *p, uint64_t seed, cudaStream_t s)
{
    p->input_seed = seed;
    harness_fill_random_device(p->d_u, p->n, harness_mix_seed(seed, 1), s);
    harness_fill_random_device(p->d_f, p->n, harness_mix_seed(seed, 2), s);
    poison_outputs(p, s);
}

static void launch(lab_problem *p, int which, cudaStream_t s)
{
    if (which == 0)
        residual_norm2(p->d_u, p->d_f, p->nx, p->ny, p->h, p->d_result, s);
    else
        jacobi_sweep(p->d_u, p->d_unew, p->d_f, p->nx, p->ny, p->h, s);
}

/*
 * How far a correct residual_norm2 may land from cpu_residual_norm2, relative
 * to it.  Every term r^2 >= 0, so the errors of the terms do not cancel:
 *  - evaluating r in float rather than double costs each r a few float
 *    rounding errors of the Laplacian's magnitude; for inputs in [-1, 1] that
 *    moves the sum by well under 1e-6 of itself, and RESIDUAL_RTOL (lab.json
 *    tolerance.residual_rtol, 1e-5) leaves a factor of ten;
 *  - summing m = (nx-2)(ny-2) terms in double in any order errs by at most
 *    gamma_(m-1) = (m-1)u / (1 - (m-1)u) times the sum, u = 2^-53 (Higham,
 *    "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002, section
 *    4.2, bound (4.4) for recursive summation; a tree does better).
 *  - on a tiny grid a single term can cancel (f close to the Laplacian), and
 *    then its float rounding is large relative to it, though not in absolute
 *    terms: r is at most 1 + 8/h^2 < 16, its float error at most a few units
 *    of float's last place at 32 (4e-6 each), so r^2 moves by at most about
 *    2 * 16 * 2.3e-5 < RESIDUAL_ATOL_TERM (lab.json tolerance.residual_atol_per_term,
 *    2e-3).  Allowing that for up to 64 terms
 *    covers the grids where one term can matter; on larger grids the
 *    relative bound dominates.
 * A residual that counts the boundary ring adds about 4/sqrt(m) of the sum
 * on a square grid: far outside this bound on every grid of the suite.
 */
static const double RESIDUAL_RTOL = LAB_TOL_RESIDUAL_RTOL;                /* lab.json */
static const double RESIDUAL_ATOL_TERM = LAB_TOL_RESIDUAL_ATOL_PER_TERM;   /* lab.json */

static double residual_bound(const lab_problem *p, double want)
{
    const double m = (p->nx > 2 && p->ny > 2) ? (double)(p->nx - 2) * (double)(p->ny - 2) : 0.0;
    const double u = ldexp(1.0, -53), gamma = m > 1 ? (m - 1) * u / (1 - (m - 1) * u) : 0.0;
    return (RESIDUAL_RTOL + gamma) * fabs(want) + RESIDUAL_ATOL_TERM * (m < 64 ? m : 64);
}

static void verify(lab_problem *p, int which, harness_report *r)
{
    if (!p->h_u)
        harness_fail("kit error: verify() needs a problem made LAB_FOR_CASES");
    harness_fill_random(p->h_u, p->n, harness_mix_seed(p->input_seed, 1));
    harness_fill_random(p->h_f, p->n, harness_mix_seed(p->input_seed, 2));
    if (which == 0) {
        double got;
        const double want = cpu_residual_norm2(p->h_u, p->h_f, p->nx, p->ny, p->h);
        CUDA_CHECK(cudaMemcpy(&got, p->d_result, sizeof got, cudaMemcpyDeviceToHost));
        const double bound = residual_bound(p, want);
        if (!(fabs(got - want) <= bound)) {
            const size_t used = strlen(r->message);
            snprintf(r->message + used, sizeof r->message - used,
                     "%sresidual_norm2: got %.17g, want %.17g (|difference| %.3g > bound %.3g)%s",
                     used ? "; " : "", got, want, fabs(got - want), bound,
                     isnan(got) ? " (NaN: *d_result never written?)" : "");
            r->ok = 0;
        }
        harness_guards_intact((const float *)p->d_result, 2, "*d_result", r);
    } else {
        cpu_jacobi_sweep(p->h_u, p->h_want, p->h_f, p->nx, p->ny, p->h);
        CUDA_CHECK(cudaMemcpy(p->h_got, p->d_unew, p->n * sizeof(float), cudaMemcpyDeviceToHost));
        harness_compare(p->h_got, p->h_want, p->nx, p->ny, 1, TOLERANCE, KIND_DIRICHLET_DIMS, r);
        harness_guards_intact(p->d_unew, p->n, "unew", r);
    }
    CUDA_CHECK(cudaMemcpy(p->h_got, p->d_u, p->n * sizeof(float), cudaMemcpyDeviceToHost));
    harness_unchanged(p->h_got, p->h_u, p->nx, p->ny, 1, "u", r);
    CUDA_CHECK(cudaMemcpy(p->h_got, p->d_f, p->n * sizeof(float), cudaMemcpyDeviceToHost));
    harness_unchanged(p->h_got, p->h_f, p->nx, p->ny, 1, "f", r);
    harness_guards_intact(p->d_u, p->n, "u", r);
    harness_guards_intact(p->d_f, p->n, "f", r);
}

static size_t gpu_check(lab_problem *p, int which, cudaStream_t s, char *why, size_t n)
{
    if (!p->d_scratch) {
        CUDA_CHECK(cudaMalloc((void **)&p->d_scratch, 3 * p->n * sizeof(float) + 16));
        CUDA_CHECK(cudaMalloc((void **)&p->d_ref_result, sizeof(double)));
    }
    /* u and f again from the seed, into scratch: never trust a buffer the student's code could write. */
    float *u = p->d_scratch, *f = u + p->n, *unew = f + p->n;
    harness_fill_random_device(u, p->n, harness_mix_seed(p->input_seed, 1), s);
    harness_fill_random_device(f, p->n, harness_mix_seed(p->input_seed, 2), s);
    if (which == 1) {
        harness_gpu_jacobi_sweep(u, unew, f, p->nx, p->ny, p->h, s);
        const size_t bad = harness_count_mismatches(p->d_unew, unew, p->n, TOLERANCE, s);
        if (bad)
            snprintf(why, n, "%zu of %zu cells of unew differ from the harness's GPU reference "
                     "on this call's fresh input", bad, p->n);
        return bad;
    }
    double got, want;
    harness_gpu_residual_norm2(u, f, p->nx, p->ny, p->h, p->d_ref_result, s);
    CUDA_CHECK(cudaMemcpyAsync(&want, p->d_ref_result, sizeof want, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaMemcpyAsync(&got, p->d_result, sizeof got, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (fabs(got - want) <= residual_bound(p, want))
        return 0;
    snprintf(why, n, "the sum %.17g differs from the harness's GPU reference %.17g "
             "on this call's fresh input", got, want);
    return 1;
}

/* ------------------------------------------------------------ determinism */

/* The bench's determinism repeats (lab_kind.h): the result of launcher `which`, as bits. */
static uint64_t digest(lab_problem *p, int which, cudaStream_t s)
{
    return which == 0 ? harness_digest(p->d_result, sizeof(double), s)
                      : harness_digest(p->d_unew, p->n * sizeof(float), s);
}

/* The student's sum, synchronously, as raw bits. */
static uint64_t residual_bits(lab_problem *p, cudaStream_t s)
{
    uint64_t bits;
    poison_outputs(p, s);
    harness_launcher_begin(KIND_LAUNCHERS[0]);
    launch(p, 0, s);
    harness_launcher_end(s, 1);
    CUDA_CHECK(cudaMemcpy(&bits, p->d_result, sizeof bits, cudaMemcpyDeviceToHost));
    return bits;
}

static double from_bits(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* c->steps runs on the same inputs, then one on a second set of buffers (other
 * addresses, same values): every run must give the same 64 bits. */
static void run_determinism(const lab_case *c, uint64_t seed, harness_report *r)
{
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    lab_problem *p = create(c, seed, LAB_FOR_CASES);
    const uint64_t first = residual_bits(p, s);
    int differing = 0, first_bad = -1;
    uint64_t bad_bits = first;
    for (int run = 1; run < c->steps; run++) {
        const uint64_t b = residual_bits(p, s);
        if (b != first && differing++ == 0)
            first_bad = run, bad_bits = b;
    }
    lab_problem *moved = create(c, seed, LAB_FOR_CASES); /* p is still allocated: these buffers lie elsewhere */
    const uint64_t elsewhere = residual_bits(moved, s);
    if (differing) {
        r->ok = 0;
        snprintf(r->message, sizeof r->message,
                 "residual_norm2 is not deterministic: %d of %d runs on the same inputs differ from "
                 "the first (run 1: %.17g, run %d: %.17g); a sum must not depend on the order in "
                 "which blocks finish (floating-point atomics)", differing, c->steps - 1,
                 from_bits(first), first_bad + 1, from_bits(bad_bits));
    } else if (elsewhere != first) {
        r->ok = 0;
        snprintf(r->message, sizeof r->message,
                 "residual_norm2 gives other bits on buffers at other addresses with the same values "
                 "(%.17g, then %.17g): the summation order must depend on the grid alone",
                 from_bits(first), from_bits(elsewhere));
    } else {
        /* deterministic; right as well? (the cells cases check it on their own grids) */
        verify(p, 0, r);
    }
    destroy(moved);
    destroy(p);
    CUDA_CHECK(cudaStreamDestroy(s));
}

/* ----------------------------------------------------------- convergence */

/*
 * The model problem, on the unit square with an n-by-n grid, h = 1/(n-1):
 *   laplace(u) = f,  f = 2 pi^2 sin(pi x) sin(pi y),  u = 0 on the boundary,
 * whose solution is u* = -sin(pi x) sin(pi y).  f sampled on the grid is the
 * slowest eigenvector of the discrete Laplacian, so starting from u = 0 the
 * error stays that one mode and each Jacobi sweep multiplies it, and the
 * residual, by exactly cos(pi h) (Barrett et al., "Templates for the Solution
 * of Linear Systems", SIAM 1994, section 2.2.1 on the convergence of Jacobi).
 * The converged discrete solution differs from u* by
 * harness_poisson_discretisation_error(n), about pi^2 h^2 / 12 = O(h^2).
 */
static lab_problem *model_problem(int n)
{
    lab_problem *p = alloc_problem(n, n, (float)(1.0 / (n - 1)), 1);
    memset(p->h_u, 0, p->n * sizeof(float));
    harness_poisson_model_f(p->h_f, n);
    upload(p);
    CUDA_CHECK(cudaMemset(p->d_unew, 0, p->n * sizeof(float))); /* the second buffer of the ping-pong */
    return p;
}

/* sqrt of the student's sum of r^2 for the grid in *d_u. */
static double residual_2norm(lab_problem *p, const float *d_u, cudaStream_t s)
{
    double sum;
    harness_poison((float *)p->d_result, 2, s);
    harness_launcher_begin(KIND_LAUNCHERS[0]);
    residual_norm2(d_u, p->d_f, p->nx, p->ny, p->h, p->d_result, s);
    harness_launcher_end(s, 1);
    CUDA_CHECK(cudaMemcpy(&sum, p->d_result, sizeof sum, cudaMemcpyDeviceToHost));
    return sqrt(sum);
}

/*
 * Jacobi sweeps with the student's kernels on the model problem p, until the
 * residual 2-norm has fallen by `reduction`, or has not reached a new low for
 * STALL_SWEEPS sweeps (float's rounding floor: about 1e-5 of the start at
 * n = 33, more on finer grids), or `max_sweeps` sweeps are done.  history[k]
 * (k = 0 .. *sweeps, at most hist_len entries) receives the residual 2-norm
 * after k sweeps.  Returns the grid holding the result.
 */
enum { STALL_SWEEPS = 500 };

static const float *solve_model(lab_problem *p, double reduction, int max_sweeps, double *history,
                                int hist_len, int *sweeps, cudaStream_t s)
{
    float *a = p->d_u, *b = p->d_unew;
    const double r0 = residual_2norm(p, a, s);
    double rk = r0, best = r0;
    int k = 0, best_k = 0;
    if (hist_len > 0)
        history[0] = r0;
    while (k < max_sweeps && rk > reduction * r0 && k - best_k < STALL_SWEEPS) {
        harness_launcher_begin(KIND_LAUNCHERS[1]);
        jacobi_sweep(a, b, p->d_f, p->nx, p->ny, p->h, s);
        harness_launcher_end(s, 0);
        float *t = a; a = b; b = t;
        k++;
        rk = residual_2norm(p, a, s);
        if (rk < best)
            best = rk, best_k = k;
        if (k < hist_len)
            history[k] = rk;
    }
    *sweeps = k;
    return a;
}

/* Largest |u - u*| over the grid. */
static double max_error(lab_problem *p, const float *d_u)
{
    const double h = p->h;
    double worst = 0.0;
    CUDA_CHECK(cudaMemcpy(p->h_got, d_u, p->n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int y = 0; y < p->ny; y++)
        for (int x = 0; x < p->nx; x++) {
            const double exact = -sin(M_PI * x * h) * sin(M_PI * y * h);
            const double e = fabs((double)p->h_got[(size_t)y * p->nx + x] - exact);
            worst = e > worst || isnan(e) ? e : worst;
        }
    return worst;
}

/* Relative tolerance of the rate check: float rounding in 20 sweeps of a
 * smooth field moves the residual ratio by well under 1e-4 of itself. */
static const double RATE_RTOL = LAB_TOL_RATE_RTOL;      /* lab.json tolerance.rate_rtol, 1e-3 */

/* The error a converged float solution may have beyond the discretisation
 * error: float's rounding, amplified by Jacobi's slow decay, is about
 * 2e-5 at n = 33 (and grows as 1/h^2). */
static const double CONVERGED_SLACK = 5e-5;

static void run_convergence(const lab_case *c, uint64_t seed, harness_report *r)
{
    (void)seed; /* the model problem is fixed */
    const int n = c->nx, rate_sweeps = c->steps;
    if (c->ny != n || n < 5 || rate_sweeps < 1)
        harness_fail("kit error: a convergence case needs nx == ny >= 5 and steps >= 1, got %dx%d, "
                     "steps=%d", c->nx, c->ny, rate_sweeps);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    lab_problem *p = model_problem(n);
    double r0;
    int sweeps;
    /* reduction 0: exactly rate_sweeps sweeps */
    const float *d_u = solve_model(p, 0.0, rate_sweeps, &r0, 1, &sweeps, s);
    const double rn = residual_2norm(p, d_u, s);
    const double want = pow(cos(M_PI / (n - 1)), rate_sweeps), got = rn / r0;
    if (!(fabs(got - want) <= RATE_RTOL * want)) {
        r->ok = 0;
        snprintf(r->message, sizeof r->message,
                 "after %d Jacobi sweeps the residual 2-norm fell from %.9g to %.9g, a factor %.9g; "
                 "the slowest mode falls by cos(pi h)^%d = %.9g (relative tolerance %g)",
                 rate_sweeps, r0, rn, got, rate_sweeps, want, RATE_RTOL);
    } else if (n <= 63) {
        /* On to convergence (from the start again), then against the analytic solution. */
        destroy(p);
        p = model_problem(n);
        d_u = solve_model(p, 1e-5, 40 * (n - 1) * (n - 1), &r0, 1, &sweeps, s);
        const double err = max_error(p, d_u), disc = harness_poisson_discretisation_error(n);
        if (!(err <= 1.1 * disc + CONVERGED_SLACK)) {
            r->ok = 0;
            snprintf(r->message, sizeof r->message,
                     "after %d Jacobi sweeps the largest error against the analytic solution "
                     "-sin(pi x) sin(pi y) is %.3g; the discretisation error of the 5-point Laplacian "
                     "at h = 1/%d is %.3g (allowed: 1.1 times that + %g)",
                     sweeps, err, n - 1, disc, CONVERGED_SLACK);
        }
    }
    destroy(p);
    CUDA_CHECK(cudaStreamDestroy(s));
}

static void run_case(const lab_case *c, uint64_t seed, harness_report *r)
{
    if (c->mode == LAB_MODE_DETERMINISM)
        run_determinism(c, seed, r);
    else if (c->mode == LAB_MODE_CONVERGENCE)
        run_convergence(c, seed, r);
    else
        harness_fail("kit error: the jacobi_residual kind has no case mode %d", c->mode);
}

/* ------------------------------------------------------------ make solve */

/*
 * `bench --solve N`: the model problem on an N x N grid, to a residual
 * reduction of `reduction` (or float's floor: solve_model), written as one JSON object to `out` (the channel): n, h,
 * sweeps, the residual 2-norm after each sweep, the expected rate cos(pi h),
 * the measured rate over the last sweeps, the largest error against the
 * analytic solution and the discretisation error it should approach.
 */
static int solve_main(int n, double reduction, int max_sweeps, FILE *out)
{
    if (n < 5 || n > 16385) {
        fprintf(stderr, "--solve N needs 5 <= N <= 16385 (an N x N grid), got %d\n", n);
        return 64;
    }
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    lab_problem *p = model_problem(n);
    double *history = xmalloc(sizeof(double) * ((size_t)max_sweeps + 1));
    int sweeps;
    const float *d_u = solve_model(p, reduction, max_sweeps, history, max_sweeps + 1, &sweeps, s);
    const int window = sweeps < 20 ? sweeps : 20;
    const double rate = window ? pow(history[sweeps] / history[sweeps - window], 1.0 / window) : 0.0;
    json_writer w;                        /* keys: protocol.h's, from protocol.py's SOLVE_KEYS */
    json_begin(&w, out);
    json_integer(&w, KEY_solve_n, n);
    json_number(&w, KEY_solve_h, 1.0 / (n - 1));
    json_integer(&w, KEY_solve_sweeps, sweeps);
    json_bool(&w, KEY_solve_converged, history[sweeps] <= reduction * history[0]);
    json_number(&w, KEY_solve_reduction, reduction);
    json_number(&w, KEY_solve_rate_expected, cos(M_PI / (n - 1)));
    json_number(&w, KEY_solve_rate_measured, rate);
    json_number(&w, KEY_solve_max_error, max_error(p, d_u));
    json_number(&w, KEY_solve_discretisation_error, harness_poisson_discretisation_error(n));
    json_open_array(&w, KEY_solve_residual);
    for (int k = 0; k <= sweeps; k++)     /* the whole history: the channel keeps it whole */
        json_number(&w, NULL, history[k]);
    json_end(&w);
    free(history);
    destroy(p);
    CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}

/* The launchers, their order and their compulsory bytes are grader/kinds.json's. */
const lab_kind LAB_KIND = {
    .create = create, .destroy = destroy, .refill = refill, .launch = launch, .verify = verify,
    .gpu_check = gpu_check, .run_case = run_case, .solve = solve_main, .digest = digest,
    .bench_arrays = 6, /* u, f, unew, and the reference's u, f, unew */
};
