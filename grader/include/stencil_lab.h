/*
 * stencil_lab.h -- the student API of the stencil lab kit.
 *
 * Each lab's kernel.cu defines one (lab 7: two) of the launchers below with C
 * linkage.  The harness allocates every buffer, fills the inputs, poisons the
 * outputs with NaN, calls the launcher and compares every cell with a CPU
 * reference (grader/harness/cpu_reference.c).
 *
 * Conventions shared by every launcher:
 *   - Grids are row-major with x fastest: cell (x, y) of an nx-by-ny grid is
 *     element [y * nx + x]; cell (x, y, z) of a 3D grid is [(z * ny + y) * nx + x].
 *   - Every pointer is device memory, allocated by the harness with cudaMalloc
 *     (so 256-byte aligned); a grid of nx*ny(*nz) floats, nothing more.
 *   - Any nx, ny, nz >= 1 must work: tails, grids smaller than a block,
 *     1-wide grids.  A fast path may assume alignment only after checking it.
 *   - Launchers are asynchronous on `stream`: launch kernels on it and return;
 *     no host synchronisation, no host copies, no allocation on the hot path.
 *   - Coefficients are distinct in every test, so swapped neighbours fail.
 */
#ifndef STENCIL_LAB_H
#define STENCIL_LAB_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2D 5-point stencil weights: centre, x-1, x+1, y-1, y+1. */
typedef struct { float c0, xm, xp, ym, yp; } stencil2d_coeffs;
/* 3D 7-point stencil weights: as 2D, plus z-1 and z+1. */
typedef struct { float c0, xm, xp, ym, yp, zm, zp; } stencil3d_coeffs;

/*
 * Labs 1 and 2: one stencil sweep with a fixed (Dirichlet) boundary.
 * Interior cells (0 < x < nx-1, 0 < y < ny-1):
 *   out = c0*in[x,y] + xm*in[x-1,y] + xp*in[x+1,y] + ym*in[x,y-1] + yp*in[x,y+1]
 * Boundary cells (x == 0, x == nx-1, y == 0 or y == ny-1): out = in, bit for bit.
 */
void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                     stencil2d_coeffs c, cudaStream_t stream);

/*
 * Lab 3: one sweep with a periodic boundary.  Every cell is updated with the
 * formula above; neighbour indices wrap: x-1 of x == 0 is nx-1, y+1 of
 * y == ny-1 is 0 (on a 1-wide grid a cell is its own neighbour).
 */
void stencil2d_periodic_sweep(const float *d_in, float *d_out, int nx, int ny,
                              stencil2d_coeffs c, cudaStream_t stream);

/*
 * Lab 4: `steps` >= 0 Dirichlet sweeps kept on the GPU, ping-ponging the two
 * buffers: d_a -> d_b -> d_a -> ...  d_a holds the initial grid; both buffers
 * may be overwritten.  Returns the buffer holding the result (d_a when steps
 * is even, d_b when odd).  No host copies or host synchronisation between steps.
 */
float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                     int steps, cudaStream_t stream);

/*
 * Labs 5 and 6: one 3D 7-point sweep with a fixed (Dirichlet) boundary:
 * boundary cells (any coordinate at 0 or n-1) copied, interior cells updated.
 */
void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                     stencil3d_coeffs c, cudaStream_t stream);

/*
 * Lab 7: Jacobi solver for the Poisson equation  laplace(u) = f  on an
 * nx-by-ny grid of spacing h, Dirichlet boundary (boundary cells of u fixed).
 * residual_norm2: r = f - (u[x-1] + u[x+1] + u[y-1] + u[y+1] - 4u) / h^2 over
 *   the interior; writes sum(r^2) to *d_result (device memory, one double),
 *   bitwise identical on every run with the same inputs.
 * jacobi_sweep: unew = (u[x-1] + u[x+1] + u[y-1] + u[y+1] - h^2 * f) / 4 on
 *   the interior (the r = 0 equation solved for the centre); boundary copied.
 */
void residual_norm2(const float *d_u, const float *d_f, int nx, int ny, float h,
                    double *d_result, cudaStream_t stream);
void jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx, int ny,
                  float h, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_LAB_H */
