/* compare.c -- every cell of a result against the CPU reference. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

int harness_is_boundary(int x, int y, int z, int nx, int ny, int nz, int dims)
{
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
        return 1;
    return dims == 3 && (z == 0 || z == nz - 1);
}

/* Appends formatted text to r->message, truncating quietly when full. */
static void append(harness_report *r, const char *fmt, ...)
{
    size_t used = strlen(r->message);
    if (used + 1 >= sizeof r->message)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message + used, sizeof r->message - used, fmt, ap);
    va_end(ap);
}

static void append_cell(harness_report *r, int x, int y, int z, int nz)
{
    if (nz > 1)
        append(r, "(x=%d, y=%d, z=%d)", x, y, z);
    else
        append(r, "(x=%d, y=%d)", x, y);
}

int harness_compare(const float *got, const float *want, int nx, int ny, int nz,
                    harness_tolerance tol, int dirichlet_dims, harness_report *r)
{
    size_t bad = 0, i = 0;
    char first[HARNESS_MAX_REPORTED][256];
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++, i++) {
                const float g = got[i], w = want[i];
                const int exact = dirichlet_dims &&
                                  harness_is_boundary(x, y, z, nx, ny, nz, dirichlet_dims);
                const int pass = exact ? memcmp(&g, &w, sizeof g) == 0
                                       : fabs((double)g - (double)w) <= tol.atol + tol.rtol * fabs((double)w);
                if (pass)
                    continue;
                if (bad < HARNESS_MAX_REPORTED) {
                    char where[64];
                    if (nz > 1)
                        snprintf(where, sizeof where, "(x=%d, y=%d, z=%d)", x, y, z);
                    else
                        snprintf(where, sizeof where, "(x=%d, y=%d)", x, y);
                    char value[64];
                    if (isnan(g))
                        snprintf(value, sizeof value, "NaN (never written?)");
                    else
                        snprintf(value, sizeof value, "%.9g", (double)g);
                    snprintf(first[bad], sizeof first[bad], "%s got %s want %.9g%s", where, value,
                             (double)w, exact ? " (boundary cell: must be copied bit for bit)" : "");
                }
                bad++;
            }
    r->mismatches += bad;
    if (bad == 0)
        return r->ok;
    r->ok = 0;
    append(r, "%s%zu of %zu cells wrong (pass: |got - want| <= %g + %g*|want|); first:",
           r->message[0] ? " " : "", bad, i, tol.atol, tol.rtol);
    for (size_t k = 0; k < bad && k < HARNESS_MAX_REPORTED; k++)
        append(r, " %s%s", first[k], k + 1 < bad && k + 1 < HARNESS_MAX_REPORTED ? ";" : "");
    return 0;
}

int harness_unchanged(const float *now, const float *before, int nx, int ny, int nz,
                      const char *what, harness_report *r)
{
    const size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    if (memcmp(now, before, n * sizeof *now) == 0)
        return 1;
    size_t i = 0;
    while (memcmp(&now[i], &before[i], sizeof *now) == 0)
        i++;
    const int x = (int)(i % (size_t)nx), y = (int)(i / (size_t)nx % (size_t)ny),
              z = (int)(i / ((size_t)nx * (size_t)ny));
    r->ok = 0;
    append(r, "%s%s was modified: it is an input; first changed cell ", r->message[0] ? " " : "", what);
    append_cell(r, x, y, z, nz);
    append(r, " now %.9g, was %.9g.", (double)now[i], (double)before[i]);
    return 0;
}
