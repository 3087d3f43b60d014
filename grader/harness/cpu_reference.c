/*
 * cpu_reference.c -- the CPU definitions every GPU result is compared with.
 * Each function is the formula of stencil_lab.h written as plainly as
 * possible, evaluated in float in the order written there, one OpenMP thread
 * per band of rows when the kit is built with OpenMP.
 */
#include <math.h>
#include <string.h>

#include "harness.h"

#define AT2(a, x, y) (a)[(size_t)(y) * (size_t)nx + (size_t)(x)]
#define AT3(a, x, y, z) (a)[((size_t)(z) * (size_t)ny + (size_t)(y)) * (size_t)nx + (size_t)(x)]

void cpu_stencil2d_sweep(const float *in, float *out, int nx, int ny, stencil2d_coeffs c)
{
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ny; y++) {
        for (int x = 0; x < nx; x++) {
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                AT2(out, x, y) = AT2(in, x, y); /* Dirichlet: boundary copied */
                continue;
            }
            AT2(out, x, y) = c.c0 * AT2(in, x, y)
                           + c.xm * AT2(in, x - 1, y) + c.xp * AT2(in, x + 1, y)
                           + c.ym * AT2(in, x, y - 1) + c.yp * AT2(in, x, y + 1);
        }
    }
}

void cpu_stencil2d_periodic_sweep(const float *in, float *out, int nx, int ny, stencil2d_coeffs c)
{
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ny; y++) {
        const int ym = y == 0 ? ny - 1 : y - 1, yp = y == ny - 1 ? 0 : y + 1;
        for (int x = 0; x < nx; x++) {
            const int xm = x == 0 ? nx - 1 : x - 1, xp = x == nx - 1 ? 0 : x + 1;
            AT2(out, x, y) = c.c0 * AT2(in, x, y)
                           + c.xm * AT2(in, xm, y) + c.xp * AT2(in, xp, y)
                           + c.ym * AT2(in, x, ym) + c.yp * AT2(in, x, yp);
        }
    }
}

float *cpu_stencil2d_run(float *a, float *b, int nx, int ny, stencil2d_coeffs c, int steps)
{
    for (int s = 0; s < steps; s++) {
        cpu_stencil2d_sweep(a, b, nx, ny, c);
        float *t = a; a = b; b = t;
    }
    return a;
}

void cpu_stencil3d_sweep(const float *in, float *out, int nx, int ny, int nz, stencil3d_coeffs c)
{
#pragma omp parallel for schedule(static)
    for (int z = 0; z < nz; z++) {
        for (int y = 0; y < ny; y++) {
            for (int x = 0; x < nx; x++) {
                if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
                    AT3(out, x, y, z) = AT3(in, x, y, z);
                    continue;
                }
                AT3(out, x, y, z) = c.c0 * AT3(in, x, y, z)
                                  + c.xm * AT3(in, x - 1, y, z) + c.xp * AT3(in, x + 1, y, z)
                                  + c.ym * AT3(in, x, y - 1, z) + c.yp * AT3(in, x, y + 1, z)
                                  + c.zm * AT3(in, x, y, z - 1) + c.zp * AT3(in, x, y, z + 1);
            }
        }
    }
}

void cpu_jacobi_sweep(const float *u, float *unew, const float *f, int nx, int ny, float h)
{
    const float h2 = h * h;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ny; y++) {
        for (int x = 0; x < nx; x++) {
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                AT2(unew, x, y) = AT2(u, x, y);
                continue;
            }
            const float s = AT2(u, x - 1, y) + AT2(u, x + 1, y) + AT2(u, x, y - 1) + AT2(u, x, y + 1);
            AT2(unew, x, y) = (s - h2 * AT2(f, x, y)) / 4.0f;
        }
    }
}

double cpu_residual_norm2(const float *u, const float *f, int nx, int ny, float h)
{
    const double h2 = (double)h * (double)h;
    long double total = 0.0L;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (int y = 1; y < ny - 1; y++) {
        long double row = 0.0L;
        for (int x = 1; x < nx - 1; x++) {
            const double lap = ((double)AT2(u, x - 1, y) + AT2(u, x + 1, y) + AT2(u, x, y - 1)
                                + AT2(u, x, y + 1) - 4.0 * AT2(u, x, y)) / h2;
            const double r = AT2(f, x, y) - lap;
            row += (long double)(r * r);
        }
        total += row;
    }
    return (double)total;
}

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void harness_poisson_model_f(float *f, int n)
{
    const double h = 1.0 / (n - 1);
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++)
            f[(size_t)y * n + x] = (float)(2.0 * M_PI * M_PI * sin(M_PI * x * h) * sin(M_PI * y * h));
}

double harness_poisson_discretisation_error(int n)
{
    const double h = 1.0 / (n - 1), s = sin(M_PI * h / 2);
    return 2.0 * M_PI * M_PI / (8.0 * s * s / (h * h)) - 1.0;
}
