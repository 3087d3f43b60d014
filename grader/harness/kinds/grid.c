/*
 * grid.c -- what every stencil kind shares (grid_kind.h): one input grid, one
 * output grid, one launcher.  Compiled per lab build (it reads the lab's
 * tolerance and its kind's facts from lab_config.h) and linked with exactly
 * one stencil kind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid_kind.h"

static const harness_tolerance TOLERANCE = { LAB_RTOL, LAB_ATOL };

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        harness_fail("out of host memory: %zu bytes requested", bytes);
    return p;
}

lab_problem *grid_create(const grid_ops *ops, const lab_case *c, uint64_t seed, int for_bench)
{
    lab_problem *p = xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->ops = ops;
    p->nx = c->nx; p->ny = c->ny; p->nz = c->nz > 0 ? c->nz : 1;
    p->steps = KIND_MULTI_STEP ? c->steps : 1;
    p->n = (size_t)p->nx * (size_t)p->ny * (size_t)p->nz;
    p->c2 = harness_coeffs2d(harness_mix_seed(seed, 1));
    p->c3 = harness_coeffs3d(harness_mix_seed(seed, 1));
    if (ops->weights > 0) {
        p->w = xmalloc((size_t)ops->weights * sizeof *p->w);
        harness_weights(p->w, ops->weights, 0.02, 0.0095, harness_mix_seed(seed, 3));
    }
    p->input_seed = harness_mix_seed(seed, 2);
    p->d_in = harness_grid_alloc(p->n);
    p->d_out = harness_grid_alloc(p->n);
    if (for_bench == LAB_FOR_BENCH) {
        /* the same values, drawn on the device: no host copy of a grid this large */
        harness_fill_random_device(p->d_in, p->n, p->input_seed, 0);
    } else {
        p->h_in = xmalloc(p->n * sizeof(float));
        p->h_want = xmalloc(p->n * sizeof(float));
        p->h_got = xmalloc(p->n * sizeof(float));
        harness_fill_random(p->h_in, p->n, p->input_seed);
        CUDA_CHECK(cudaMemcpy(p->d_in, p->h_in, p->n * sizeof(float), cudaMemcpyHostToDevice));
    }
    harness_poison(p->d_out, p->n, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    return p;
}

void grid_destroy(lab_problem *p)
{
    if (!p)
        return;
    harness_grid_free(p->d_in);
    harness_grid_free(p->d_out);
    for (int i = 0; i < 2; i++)
        if (p->d_scratch[i])
            CUDA_CHECK(cudaFree(p->d_scratch[i]));
    free(p->h_in); free(p->h_want); free(p->h_got);
    free(p->w);
    free(p);
}

void grid_refill(lab_problem *p, uint64_t seed, cudaStream_t s)
{
    p->input_seed = seed;
    harness_fill_random_device(p->d_in, p->n, seed, s);
    harness_poison(p->d_out, p->n, s);
}

void grid_launch(lab_problem *p, int which, cudaStream_t s)
{
    (void)which;
    const float *r = p->ops->launch(p, s);
    /* A multi-step launcher returns one of its two buffers; anything else is foreign. */
    p->d_result = r == p->d_in || r == p->d_out ? r : NULL;
}

/* The CPU reference of the current input (regenerated from its seed, since
 * a multi-step launcher may overwrite d_in) into h_want. */
static void cpu_reference(lab_problem *p)
{
    harness_fill_random(p->h_in, p->n, p->input_seed);
    if (!KIND_MULTI_STEP) {
        p->ops->cpu_sweep(p, p->h_in, p->h_want);
        return;
    }
    float *a = p->h_want, *b = p->h_got; /* h_got is free until the result is copied in */
    memcpy(a, p->h_in, p->n * sizeof(float));
    for (int s = 0; s < p->steps; s++) {
        p->ops->cpu_sweep(p, a, b);
        float *t = a; a = b; b = t;
    }
    if (a != p->h_want)
        memcpy(p->h_want, a, p->n * sizeof(float));
}

static const char *foreign_pointer(void)
{
    return KIND_API " returned a pointer that is neither d_a nor d_b";
}

void grid_verify(lab_problem *p, int which, harness_report *r)
{
    (void)which;
    const int multi = KIND_MULTI_STEP;
    if (!p->h_in)
        harness_fail("kit error: verify() needs a problem made LAB_FOR_CASES");
    cpu_reference(p);
    if (!p->d_result) {
        r->ok = 0;
        snprintf(r->message, sizeof r->message, "%s", foreign_pointer());
    } else {
        CUDA_CHECK(cudaMemcpy(p->h_got, p->d_result, p->n * sizeof(float), cudaMemcpyDeviceToHost));
        harness_compare(p->h_got, p->h_want, p->nx, p->ny, p->nz, TOLERANCE, KIND_DIRICHLET_DIMS, r);
    }
    harness_guards_intact(p->d_out, p->n, multi ? "d_b" : "the output grid", r);
    harness_guards_intact(p->d_in, p->n, multi ? "d_a" : "the input grid", r);
    if (!multi) { /* a multi-step launcher may overwrite its input; a sweep may not */
        CUDA_CHECK(cudaMemcpy(p->h_got, p->d_in, p->n * sizeof(float), cudaMemcpyDeviceToHost));
        harness_unchanged(p->h_got, p->h_in, p->nx, p->ny, p->nz, "the input grid", r);
    }
}

size_t grid_gpu_check(lab_problem *p, int which, cudaStream_t s, char *why, size_t n)
{
    (void)which;
    if (!p->d_result) {
        snprintf(why, n, "%s", foreign_pointer());
        return p->n ? p->n : 1;
    }
    for (int i = 0; i < 2; i++)
        if (!p->d_scratch[i])
            CUDA_CHECK(cudaMalloc((void **)&p->d_scratch[i], p->n * sizeof(float) + 16));
    /* The input again from its seed: never trust a buffer the student's code could write. */
    float *a = p->d_scratch[0], *b = p->d_scratch[1];
    harness_fill_random_device(a, p->n, p->input_seed, s);
    for (int step = 0; step < p->steps; step++) {
        p->ops->gpu_sweep(p, a, b, s);
        float *t = a; a = b; b = t;
    }
    const size_t bad = harness_count_mismatches(p->d_result, a, p->n, TOLERANCE, s);
    if (bad)
        snprintf(why, n, "%zu of %zu cells differ from the harness's GPU reference "
                 "on this call's fresh input", bad, p->n);
    return bad;
}
