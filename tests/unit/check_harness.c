/*
 * check_harness.c -- unit tests of the harness parts that need no GPU: the
 * CPU references, the comparison, the timing statistics and the seeding.
 * Everything here is hand-checkable: tiny grids with values worked out below.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const stencil2d_coeffs C2 = { 0.5f, 0.1f, 0.2f, 0.3f, 0.4f }; /* c0 xm xp ym yp */
static const harness_tolerance TOL = { 1e-5, 1e-6 };

/* ------------------------------------------------------------ CPU reference */

START_TEST(sweep_3x3_by_hand)
{
    /* in = 1..9 row-major: the single interior cell (1,1) holds 5, with
     * x-1 = 4, x+1 = 6, y-1 = 2, y+1 = 8. */
    const float in[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    float out[9];
    cpu_stencil2d_sweep(in, out, 3, 3, C2);
    ck_assert_float_eq_tol(out[4], 0.5f * 5 + 0.1f * 4 + 0.2f * 6 + 0.3f * 2 + 0.4f * 8, 1e-6f);
    for (int i = 0; i < 9; i++)
        if (i != 4)
            ck_assert_msg(out[i] == in[i], "boundary cell %d not copied", i);
}
END_TEST

START_TEST(sweep_degenerate_is_copy)
{
    const int shapes[][2] = { { 1, 1 }, { 1, 5 }, { 5, 1 }, { 2, 2 }, { 2, 7 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        float in[14], out[14];
        const int n = shapes[s][0] * shapes[s][1];
        harness_fill_random(in, (size_t)n, 7 + s);
        cpu_stencil2d_sweep(in, out, shapes[s][0], shapes[s][1], C2);
        ck_assert_msg(memcmp(in, out, (size_t)n * sizeof(float)) == 0,
                      "%dx%d has no interior: every cell must be copied", shapes[s][0], shapes[s][1]);
    }
}
END_TEST

START_TEST(periodic_wraps_corner)
{
    /* 3x2 grid; cell (0,0): x-1 wraps to (2,0), y-1 and y+1 are both row 1. */
    const float in[6] = { 1, 2, 3, 4, 5, 6 };
    float out[6];
    cpu_stencil2d_periodic_sweep(in, out, 3, 2, C2);
    ck_assert_float_eq_tol(out[0], 0.5f * 1 + 0.1f * 3 + 0.2f * 2 + 0.3f * 4 + 0.4f * 4, 1e-6f);
    /* cell (2,1): x+1 wraps to (0,1) = 4, x-1 = 5, y-1 = y+1 = (2,0) = 3 */
    ck_assert_float_eq_tol(out[5], 0.5f * 6 + 0.1f * 5 + 0.2f * 4 + 0.3f * 3 + 0.4f * 3, 1e-6f);
}
END_TEST

START_TEST(periodic_one_cell_is_own_neighbour)
{
    const float in[1] = { 2 };
    float out[1];
    cpu_stencil2d_periodic_sweep(in, out, 1, 1, C2);
    ck_assert_float_eq_tol(out[0], 2 * (0.5f + 0.1f + 0.2f + 0.3f + 0.4f), 1e-6f);
}
END_TEST

START_TEST(run_returns_right_buffer)
{
    float a[16], b[16], once[16], twice[16];
    harness_fill_random(a, 16, 3);
    cpu_stencil2d_sweep(a, once, 4, 4, C2);
    cpu_stencil2d_sweep(once, twice, 4, 4, C2);
    ck_assert_ptr_eq(cpu_stencil2d_run(a, b, 4, 4, C2, 0), a);
    ck_assert_ptr_eq(cpu_stencil2d_run(a, b, 4, 4, C2, 1), b);
    ck_assert(memcmp(b, once, sizeof once) == 0);
    harness_fill_random(a, 16, 3);
    ck_assert_ptr_eq(cpu_stencil2d_run(a, b, 4, 4, C2, 2), a);
    ck_assert(memcmp(a, twice, sizeof twice) == 0);
}
END_TEST

START_TEST(sweep3d_by_hand)
{
    const stencil3d_coeffs c = { 0.2f, 0.05f, 0.07f, 0.09f, 0.11f, 0.13f, 0.15f };
    float in[27], out[27];
    for (int i = 0; i < 27; i++)
        in[i] = (float)i;
    cpu_stencil3d_sweep(in, out, 3, 3, 3, c);
    /* the one interior cell (1,1,1) = 13; x+-1 = 12, 14; y+-1 = 10, 16; z+-1 = 4, 22 */
    ck_assert_float_eq_tol(out[13], 0.2f * 13 + 0.05f * 12 + 0.07f * 14 + 0.09f * 10 + 0.11f * 16 +
                                        0.13f * 4 + 0.15f * 22, 1e-5f);
    ck_assert(out[0] == in[0] && out[26] == in[26]);
}
END_TEST

/* --------------------------------------------------------------- comparison */

static harness_report fresh_report(void)
{
    harness_report r;
    memset(&r, 0, sizeof r);
    r.ok = 1;
    return r;
}

START_TEST(compare_accepts_within_tolerance)
{
    float want[4] = { 1.0f, -2.0f, 0.0f, 100.0f }, got[4];
    for (int i = 0; i < 4; i++)
        got[i] = want[i] + (float)(0.5 * (TOL.atol + TOL.rtol * fabs(want[i])));
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 4, 1, 1, TOL, 0, &r), 1);
    ck_assert_str_eq(r.message, "");
}
END_TEST

START_TEST(compare_rejects_beyond_tolerance_with_coordinates)
{
    float want[6] = { 0 }, got[6] = { 0 };
    got[4] = 1e-3f; /* cell (x=1, y=1) of a 3x2 grid */
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 3, 2, 1, TOL, 0, &r), 0);
    ck_assert_uint_eq(r.mismatches, 1);
    ck_assert_msg(strstr(r.message, "(x=1, y=1)") != NULL, "message lacks coordinates: %s", r.message);
}
END_TEST

START_TEST(compare_nan_never_passes)
{
    const float want[2] = { NAN, 1.0f };
    const float got[2] = { NAN, NAN };
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 2, 1, 1, TOL, 0, &r), 0);
    ck_assert_uint_eq(r.mismatches, 2);
    ck_assert_msg(strstr(r.message, "NaN") != NULL, "%s", r.message);
}
END_TEST

START_TEST(compare_boundary_bit_exact)
{
    /* 3x3: a 1-ulp change on a boundary cell fails with dirichlet_dims = 2,
     * passes with 0 (periodic problems have no copied cells). */
    float want[9], got[9];
    harness_fill_random(want, 9, 11);
    memcpy(got, want, sizeof got);
    got[1] = nextafterf(want[1], 2.0f);
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 3, 3, 1, TOL, 2, &r), 0);
    ck_assert_msg(strstr(r.message, "bit for bit") != NULL, "%s", r.message);
    r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 3, 3, 1, TOL, 0, &r), 1);
    /* the same change on the interior cell passes: it is within tolerance */
    memcpy(got, want, sizeof got);
    got[4] = nextafterf(want[4], 2.0f);
    r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 3, 3, 1, TOL, 2, &r), 1);
}
END_TEST

START_TEST(compare_negative_zero_on_boundary)
{
    const float want[1] = { 0.0f }, got[1] = { -0.0f };
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_compare(got, want, 1, 1, 1, TOL, 2, &r), 0);
}
END_TEST

START_TEST(compare_reports_at_most_five)
{
    float want[100] = { 0 }, got[100];
    for (int i = 0; i < 100; i++)
        got[i] = 1.0f;
    harness_report r = fresh_report();
    harness_compare(got, want, 10, 10, 1, TOL, 0, &r);
    ck_assert_uint_eq(r.mismatches, 100);
    int listed = 0;
    for (const char *p = r.message; (p = strstr(p, " got ")) != NULL; p++)
        listed++;
    ck_assert_int_eq(listed, HARNESS_MAX_REPORTED);
}
END_TEST

START_TEST(boundary_in_3d)
{
    ck_assert(harness_is_boundary(1, 1, 0, 3, 3, 3, 3));
    ck_assert(!harness_is_boundary(1, 1, 1, 3, 3, 3, 3));
    ck_assert(!harness_is_boundary(1, 1, 0, 3, 3, 1, 2)); /* 2D: z is not a dimension */
}
END_TEST

START_TEST(unchanged_names_first_cell)
{
    float before[6] = { 1, 2, 3, 4, 5, 6 }, now[6];
    memcpy(now, before, sizeof now);
    harness_report r = fresh_report();
    ck_assert_int_eq(harness_unchanged(now, before, 3, 2, 1, "the input grid", &r), 1);
    now[5] = 0;
    ck_assert_int_eq(harness_unchanged(now, before, 3, 2, 1, "the input grid", &r), 0);
    ck_assert_msg(strstr(r.message, "(x=2, y=1)") != NULL, "%s", r.message);
}
END_TEST

/* --------------------------------------------------------------- statistics */

START_TEST(median_odd_even)
{
    double odd[5] = { 5, 1, 4, 2, 3 }, even[4] = { 4, 1, 3, 2 };
    ck_assert_double_eq(harness_median(odd, 5), 3.0);
    ck_assert_double_eq(harness_median(even, 4), 2.5);
    double one[1] = { 7 };
    ck_assert_double_eq(harness_median(one, 1), 7.0);
}
END_TEST

/* The median's 95% interval from the order statistics (stats.c): ranks 2 and 9 of 10, 6 and 15 of
 * 20 (the exact binomial intervals, Conover 1999, table A3), on shuffled samples. */
START_TEST(median_confidence_interval)
{
    double v[20], lo, hi;
    for (int i = 0; i < 10; i++)
        v[i] = (double)((i * 7) % 10 + 1);             /* 1..10, shuffled */
    ck_assert_double_eq(harness_median_ci(v, 10, &lo, &hi), 5.5);
    ck_assert_double_eq(lo, 2.0);
    ck_assert_double_eq(hi, 9.0);
    for (int i = 0; i < 20; i++)
        v[i] = (double)((i * 7) % 20 + 1);             /* 1..20, shuffled */
    ck_assert_double_eq(harness_median_ci(v, 20, &lo, &hi), 10.5);
    ck_assert_double_eq(lo, 6.0);
    ck_assert_double_eq(hi, 15.0);
    v[0] = 3.0;
    ck_assert_double_eq(harness_median_ci(v, 1, &lo, &hi), 3.0);   /* one sample: the interval is it */
    ck_assert_double_eq(lo, 3.0);
    ck_assert_double_eq(hi, 3.0);
}
END_TEST

/* A kind's own weights (harness_weights): pairwise at least `gap` apart, in their range, the
 * same for the same seed. */
START_TEST(weights_distinct_and_reproducible)
{
    float w[HARNESS_MAX_WEIGHTS], again[HARNESS_MAX_WEIGHTS];
    harness_weights(w, HARNESS_MAX_WEIGHTS, 0.02, 0.0095, 42);
    harness_weights(again, HARNESS_MAX_WEIGHTS, 0.02, 0.0095, 42);
    for (int i = 0; i < HARNESS_MAX_WEIGHTS; i++) {
        ck_assert_float_eq(w[i], again[i]);
        ck_assert(w[i] >= 0.02f && w[i] < 0.02f + HARNESS_MAX_WEIGHTS * 0.0095f + 0.005f);
        for (int j = 0; j < i; j++)
            ck_assert_msg(fabsf(w[i] - w[j]) >= 0.0095f - 0.005f, "weights %d and %d too close", i, j);
    }
}
END_TEST

START_TEST(min_max_gbps)
{
    const double v[3] = { 2, -1, 9 };
    ck_assert_double_eq(harness_min(v, 3), -1.0);
    ck_assert_double_eq(harness_max(v, 3), 9.0);
    /* 1e9 bytes in 1000 ms is 1 GB/s; 2 GiB in 1 ms is 2147.483648 GB/s */
    ck_assert_double_eq_tol(harness_gbps(1e9, 1000.0), 1.0, 1e-12);
    ck_assert_double_eq_tol(harness_gbps(2.0 * 1073741824.0, 1.0), 2147.483648, 1e-9);
}
END_TEST

/* ------------------------------------------------------------------ seeding */

START_TEST(random_is_reproducible_and_in_range)
{
    float a[1000], b[1000];
    harness_fill_random(a, 1000, 123);
    harness_fill_random(b, 1000, 123);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    harness_fill_random(b, 1000, 124);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    int distinct = 0;
    for (int i = 0; i < 1000; i++) {
        ck_assert(a[i] >= -1.0f && a[i] < 1.0f);
        distinct += i > 0 && a[i] != a[i - 1];
    }
    ck_assert_int_gt(distinct, 990); /* not all ones, not constant */
}
END_TEST

START_TEST(coefficients_distinct)
{
    for (uint64_t s = 0; s < 200; s++) {
        const stencil2d_coeffs c = harness_coeffs2d(s);
        const float w[4] = { c.xm, c.xp, c.ym, c.yp };
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                ck_assert_msg(fabsf(w[i] - w[j]) >= 0.02f, "seed %llu: weights %d, %d too close",
                              (unsigned long long)s, i, j);
        ck_assert(c.c0 + c.xm + c.xp + c.ym + c.yp < 1.0f);
        const stencil3d_coeffs d = harness_coeffs3d(s);
        const float v[6] = { d.xm, d.xp, d.ym, d.yp, d.zm, d.zp };
        for (int i = 0; i < 6; i++)
            for (int j = i + 1; j < 6; j++)
                ck_assert(fabsf(v[i] - v[j]) >= 0.02f);
        ck_assert(d.c0 + d.xm + d.xp + d.ym + d.yp + d.zm + d.zp < 1.0f);
    }
}
END_TEST

START_TEST(mix_seed_separates_streams)
{
    ck_assert(harness_mix_seed(1, 0) != harness_mix_seed(1, 1));
    ck_assert(harness_mix_seed(1, 0) != harness_mix_seed(2, 0));
    ck_assert(harness_mix_seed(5, 9) == harness_mix_seed(5, 9));
}
END_TEST

/* ------------------------------------------------- lab 7: Jacobi, residual */

START_TEST(jacobi_3x3_by_hand)
{
    /* u = 1..9, f = 0.5 everywhere, h = 0.5: the interior cell (1,1) gets
     * (4 + 6 + 2 + 8 - 0.25 * 0.5) / 4 = 4.96875; the boundary is copied. */
    const float u[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    const float f[9] = { 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f };
    float unew[9];
    cpu_jacobi_sweep(u, unew, f, 3, 3, 0.5f);
    ck_assert_float_eq(unew[4], 4.96875f);
    for (int i = 0; i < 9; i++)
        if (i != 4)
            ck_assert_msg(unew[i] == u[i], "boundary cell %d not copied", i);
}
END_TEST

START_TEST(residual_by_hand)
{
    /* 4x3 grid, two interior cells (1,1) and (2,1); h = 0.5 (1/h^2 = 4).
     * u row-major: row 0: 0 1 2 3, row 1: 4 5 6 7, row 2: 8 9 10 11, f = 1.
     * (1,1): neighbours 4 + 6 + 1 + 9 = 20, minus 4*5: laplacian 0, r = 1;
     * (2,1): 5 + 7 + 2 + 10 = 24, minus 4*6: 0, r = 1.  Sum of r^2 = 2.
     * With u(2,1) = 7: (1,1) gets 4 + 7 + 1 + 9 - 20 = 1, laplacian 4, r = -3;
     * (2,1) gets 24 - 28 = -4, laplacian -16, r = 17: 9 + 289 = 298. */
    float u[12], f[12];
    for (int i = 0; i < 12; i++)
        u[i] = (float)i, f[i] = 1.0f;
    ck_assert_double_eq(cpu_residual_norm2(u, f, 4, 3, 0.5f), 2.0);
    u[6] = 7.0f;
    ck_assert_double_eq(cpu_residual_norm2(u, f, 4, 3, 0.5f), 298.0);
}
END_TEST

START_TEST(residual_without_interior_is_zero)
{
    const float u[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, f[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    ck_assert_double_eq(cpu_residual_norm2(u, f, 2, 4, 0.5f), 0.0);
    ck_assert_double_eq(cpu_residual_norm2(u, f, 8, 1, 0.5f), 0.0);
    ck_assert_double_eq(cpu_residual_norm2(u, f, 1, 8, 0.5f), 0.0);
}
END_TEST

/* Jacobi on the model problem from u = 0: the residual falls by cos(pi h)
 * per sweep, and the converged solution lies within the discretisation error
 * of -sin(pi x) sin(pi y).  Lab 7's convergence cases assume this of the
 * student's kernels; here it is checked with the CPU reference. */
START_TEST(model_problem_rate_and_error)
{
    const int n = 17;
    const double h = 1.0 / (n - 1), pi = 3.14159265358979323846;
    float *u = calloc((size_t)n * n, sizeof(float)), *v = calloc((size_t)n * n, sizeof(float));
    float *f = malloc((size_t)n * n * sizeof(float));
    harness_poisson_model_f(f, n);
    const double r0 = sqrt(cpu_residual_norm2(u, f, n, n, (float)h));
    for (int k = 0; k < 20; k++) {
        cpu_jacobi_sweep(u, v, f, n, n, (float)h);
        float *t = u; u = v; v = t;
    }
    const double ratio = sqrt(cpu_residual_norm2(u, f, n, n, (float)h)) / r0;
    ck_assert_double_eq_tol(ratio, pow(cos(pi * h), 20), 1e-4 * ratio);
    for (int k = 0; k < 4000; k++) { /* 2.8 / h^2 sweeps reduce the error a million-fold */
        cpu_jacobi_sweep(u, v, f, n, n, (float)h);
        float *t = u; u = v; v = t;
    }
    const float centre = u[(n / 2) * n + n / 2]; /* x = y = 1/2, where u* = -1 */
    const double disc = harness_poisson_discretisation_error(n);
    ck_assert_double_eq_tol(disc, pi * pi * h * h / 12, 0.05 * disc);
    ck_assert_double_eq_tol(-centre - 1.0, disc, 0.02 * disc);
    free(u); free(v); free(f);
}
END_TEST

/* An H100's launch limits (cudaDeviceGetAttribute), for harness_launch_breaks. */
static const harness_launch_limits H100 = { { 2147483647, 65535, 65535 }, { 1024, 1024, 64 }, 1024,
                                            49152, 232448 };

START_TEST(launch_limits_name_the_broken_one)
{
    char why[256];
    const unsigned tall[3] = { 1, 137501, 1 }, deep[3] = { 1, 1, 275001 }, ok_grid[3] = { 1024, 65535, 1 };
    const unsigned block[3] = { 16, 16, 1 }, wide[3] = { 64, 32, 1 }, empty[3] = { 16, 0, 1 };
    ck_assert(!harness_launch_breaks(&H100, ok_grid, block, 0, why, sizeof why));
    ck_assert(harness_launch_breaks(&H100, tall, block, 0, why, sizeof why));
    ck_assert_str_eq(why, "gridDim.y = 137501 is more than the 65535 this GPU allows");
    ck_assert(harness_launch_breaks(&H100, deep, block, 0, why, sizeof why));
    ck_assert_str_eq(why, "gridDim.z = 275001 is more than the 65535 this GPU allows");
    ck_assert(harness_launch_breaks(&H100, ok_grid, wide, 0, why, sizeof why));
    ck_assert_str_eq(why, "2048 threads per block are more than the 1024 this GPU allows");
    ck_assert(harness_launch_breaks(&H100, ok_grid, empty, 0, why, sizeof why));
    ck_assert_str_eq(why, "blockDim.y is 0");
    ck_assert(harness_launch_breaks(&H100, ok_grid, block, 65536, why, sizeof why));
    ck_assert(strstr(why, "65536 bytes of dynamic shared memory per block are more than the 49152") != NULL);
    ck_assert(harness_launch_breaks(&H100, ok_grid, block, 300000, why, sizeof why));
    ck_assert(strstr(why, "more than the 232448 this GPU has for a block") != NULL);
}
END_TEST

static Suite *harness_suite(void)
{
    Suite *s = suite_create("harness");
    TCase *ref = tcase_create("cpu-reference");
    tcase_add_test(ref, sweep_3x3_by_hand);
    tcase_add_test(ref, sweep_degenerate_is_copy);
    tcase_add_test(ref, periodic_wraps_corner);
    tcase_add_test(ref, periodic_one_cell_is_own_neighbour);
    tcase_add_test(ref, run_returns_right_buffer);
    tcase_add_test(ref, sweep3d_by_hand);
    suite_add_tcase(s, ref);

    TCase *lab7 = tcase_create("jacobi-residual");
    tcase_add_test(lab7, jacobi_3x3_by_hand);
    tcase_add_test(lab7, residual_by_hand);
    tcase_add_test(lab7, residual_without_interior_is_zero);
    tcase_add_test(lab7, model_problem_rate_and_error);
    suite_add_tcase(s, lab7);

    TCase *cmp = tcase_create("comparison");
    tcase_add_test(cmp, compare_accepts_within_tolerance);
    tcase_add_test(cmp, compare_rejects_beyond_tolerance_with_coordinates);
    tcase_add_test(cmp, compare_nan_never_passes);
    tcase_add_test(cmp, compare_boundary_bit_exact);
    tcase_add_test(cmp, compare_negative_zero_on_boundary);
    tcase_add_test(cmp, compare_reports_at_most_five);
    tcase_add_test(cmp, boundary_in_3d);
    tcase_add_test(cmp, unchanged_names_first_cell);
    suite_add_tcase(s, cmp);

    TCase *st = tcase_create("statistics");
    tcase_add_test(st, median_odd_even);
    tcase_add_test(st, min_max_gbps);
    tcase_add_test(st, median_confidence_interval);
    suite_add_tcase(s, st);

    TCase *launch = tcase_create("launch-guard");
    tcase_add_test(launch, launch_limits_name_the_broken_one);
    suite_add_tcase(s, launch);

    TCase *rnd = tcase_create("seeding");
    tcase_add_test(rnd, random_is_reproducible_and_in_range);
    tcase_add_test(rnd, coefficients_distinct);
    tcase_add_test(rnd, weights_distinct_and_reproducible);
    tcase_add_test(rnd, mix_seed_separates_streams);
    suite_add_tcase(s, rnd);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(harness_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
