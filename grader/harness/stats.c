/* stats.c -- summary statistics of repeated timings. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double harness_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double harness_min(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

double harness_max(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

double harness_gbps(double bytes, double ms)
{
    return bytes / (ms * 1e-3) / 1e9;
}

/*
 * The distribution-free confidence interval of a median: with the sample
 * sorted, the true median lies between the order statistics of ranks
 * j = n/2 - z sqrt(n)/2 and k = 1 + n/2 + z sqrt(n)/2 (1-based, rounded to
 * the nearest rank) with probability about 95% for z = 1.96 (n = 10: the 2nd
 * and the 9th; n = 20: the 6th and the 15th), whatever the distribution of the
 * timings (the number of samples below the median is binomial(n, 1/2), here
 * in its normal approximation; W. J. Conover, "Practical Nonparametric
 * Statistics", 3rd ed., Wiley 1999, section 3.2, the confidence interval for
 * a quantile).  Ranks are clamped to the sample.
 */
double harness_median_ci(double *v, int n, double *lo, double *hi)
{
    const double median = harness_median(v, n);        /* sorts v */
    const double half = 1.96 * sqrt((double)n) / 2.0;
    int j = (int)lround(n / 2.0 - half), k = (int)lround(1.0 + n / 2.0 + half);
    j = j < 1 ? 1 : j;
    k = k > n ? n : k;
    *lo = v[j - 1];
    *hi = v[k - 1];
    return median;
}
