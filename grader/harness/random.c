/*
 * random.c -- seeded inputs.  Every value is a pure function of (seed, index)
 * through SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
 * number generators", OOPSLA 2014), so grids are reproducible from the seed
 * alone, whatever the number of threads filling them.
 */
#include <stdio.h>
#include <time.h>

#include "harness.h"

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits: exactly representable as a float. */
static double unit(uint64_t bits) { return (double)(bits >> 40) * (1.0 / 16777216.0); }

uint64_t harness_fresh_seed(void)
{
    uint64_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&seed, sizeof seed, 1, f) != 1)
        seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
    if (f)
        fclose(f);
    return seed >> 1; /* keep it printable as a signed 64-bit number too */
}

uint64_t harness_mix_seed(uint64_t seed, uint64_t stream)
{
    return splitmix64(seed ^ splitmix64(stream + 0x632BE59BD9B4E019ull));
}

void harness_fill_random(float *h, size_t n, uint64_t seed)
{
    const uint64_t key = splitmix64(seed);
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        h[i] = (float)(2.0 * unit(splitmix64(key + (uint64_t)i)) - 1.0);
}

/* Draws `count` weights in [lo, lo + count * gap + jitter) that are pairwise at
 * least `gap` apart: a shuffled ladder of slots, each with a small jitter. */
static void distinct_weights(float *w, int count, double lo, double gap, uint64_t seed)
{
    int slot[HARNESS_MAX_WEIGHTS];
    for (int i = 0; i < count; i++)
        slot[i] = i;
    for (int i = count - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(splitmix64(seed + (uint64_t)i) % (uint64_t)(i + 1));
        int t = slot[i]; slot[i] = slot[j]; slot[j] = t;
    }
    for (int i = 0; i < count; i++)
        w[i] = (float)(lo + gap * slot[i] + 0.005 * unit(splitmix64(seed + 100 + (uint64_t)i)));
}

stencil2d_coeffs harness_coeffs2d(uint64_t seed)
{
    float w[4];
    distinct_weights(w, 4, 0.05, 0.03, seed);
    stencil2d_coeffs c = { (float)(0.30 + 0.1 * unit(splitmix64(seed ^ 0xC0))), w[0], w[1], w[2], w[3] };
    return c;
}

stencil3d_coeffs harness_coeffs3d(uint64_t seed)
{
    float w[6];
    distinct_weights(w, 6, 0.05, 0.026, seed);
    stencil3d_coeffs c = { (float)(0.20 + 0.05 * unit(splitmix64(seed ^ 0xC0))),
                           w[0], w[1], w[2], w[3], w[4], w[5] };
    return c;
}

void harness_weights(float *w, int count, double lo, double gap, uint64_t seed)
{
    if (count < 1 || count > HARNESS_MAX_WEIGHTS)
        harness_fail("kit error: harness_weights: %d weights asked for, at most %d", count, HARNESS_MAX_WEIGHTS);
    distinct_weights(w, count, lo, gap, seed);
}
