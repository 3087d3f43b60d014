/*
 * harness.h -- the lab kit's test and timing library (C; CUDA runtime API only).
 *
 * Used by every lab's Check suite and bench program; never by a student's
 * kernel.cu (the grader rejects a compiled student object that needs any
 * symbol of it: stencil_grader/grading/symbols.py).
 *
 * Layout everywhere: row-major, x fastest; cell (x, y, z) of an nx*ny*nz grid
 * is element [(z * ny + y) * nx + x]; 2D grids have nz == 1.
 * Units: sizes in elements unless named *_bytes; times in milliseconds;
 * bandwidth in GB/s with 1 GB = 1e9 bytes.
 *
 * Errors: a failing CUDA call goes through harness_fail(), which by default
 * prints the message and exits with status 3; a Check suite installs a handler
 * that turns it into a test failure instead (harness_set_error_handler).
 */
#ifndef STENCIL_HARNESS_H
#define STENCIL_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "stencil_lab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

/* Checks a CUDA runtime call; on failure reports the call's text, file, line
 * and CUDA's error string through harness_fail().  Never compiled away. */
#define CUDA_CHECK(call) harness_cuda_check((call), #call, __FILE__, __LINE__)

/* Checks the last kernel launch (configuration errors) and, with sync != 0,
 * waits for `stream` so that faults inside the kernel are reported here. */
#define CUDA_CHECK_LAUNCH(stream, sync) \
    harness_check_launch((stream), (sync), __FILE__, __LINE__)

void harness_cuda_check(cudaError_t err, const char *call, const char *file, int line);
void harness_check_launch(cudaStream_t stream, int sync, const char *file, int line);

/* Formats a message and hands it to the error handler.  Messages about CUDA
 * start with "CUDA error:" (the grader classifies such a failure as a crash). */
void harness_fail(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* The handler must not return (exit, or longjmp as Check's ck_abort does). */
typedef void (*harness_error_handler)(const char *message);
void harness_set_error_handler(harness_error_handler handler);

/* ---------------------------------------------------- the student's launches */

/* A call of a student's launcher, bracketed (launch_guard.c): harness_launcher_begin(name)
 * before it notes every launch configuration the call pushes (<<<grid, block, shared,
 * stream>>>); harness_launcher_end(stream, sync) after it checks the launches like
 * CUDA_CHECK_LAUNCH, naming the launcher.  A launch the runtime refused fails with a message
 * that starts with LAUNCH_REFUSED (protocol.h): the configuration the launcher asked for and
 * the limit of this GPU it broke.  Other CUDA errors start with "CUDA error:". */
void harness_launcher_begin(const char *launcher);
void harness_launcher_end(cudaStream_t stream, int sync);

/* A GPU's launch limits (cudaDeviceGetAttribute): gridDim and blockDim per axis, threads per
 * block, dynamic shared memory per block by default and at most (opt-in). */
typedef struct {
    int grid[3], block[3], threads, smem_default, smem_optin;
} harness_launch_limits;

/* 1, with one sentence saying which limit into why[0..n), when a launch of `grid` blocks of
 * `block` threads with `smem` bytes of dynamic shared memory breaks one of lim; else 0. */
int harness_launch_breaks(const harness_launch_limits *lim, const unsigned grid[3], const unsigned block[3],
                          size_t smem, char *why, size_t n);

/* Tolerance of a comparison: |got - want| <= atol + rtol * |want|. */
typedef struct { double rtol, atol; } harness_tolerance;

/* ------------------------------------------------------------------ inputs */

/* Seeds: a fresh 64-bit seed from /dev/urandom (time as fallback), and a
 * derived seed for sub-stream `stream` (case index, array number...). */
uint64_t harness_fresh_seed(void);
uint64_t harness_mix_seed(uint64_t seed, uint64_t stream);

/* Fills h[0..n) with values uniform in [-1, 1), a pure function of (seed, i):
 * the same seed gives the same grid on every machine and thread count. */
void harness_fill_random(float *h, size_t n, uint64_t seed);

/* Stencil weights drawn from `seed`: the centre weight in [0.30, 0.40) (2D)
 * or [0.20, 0.25) (3D), the others distinct (pairwise at least 0.02 apart) in
 * [0.05, 0.20), so a kernel
 * that swaps two neighbours differs from the reference by far more than the
 * tolerance, and the weights sum below 1 (repeated sweeps stay bounded). */
stencil2d_coeffs harness_coeffs2d(uint64_t seed);
stencil3d_coeffs harness_coeffs3d(uint64_t seed);
/* count (at most HARNESS_MAX_WEIGHTS) weights drawn from `seed`, pairwise at least `gap`
 * apart, in [lo, lo + count * gap + 0.005): for a kind whose stencil has weights of its own. */
enum { HARNESS_MAX_WEIGHTS = 16 };
void harness_weights(float *w, int count, double lo, double gap, uint64_t seed);

/* ----------------------------------------------------------- CPU reference */

/* The definitions of stencil_lab.h, computed in float in the order written
 * there (c0 term first), one OpenMP thread per band of rows when available.
 * in and out must not overlap. */
void cpu_stencil2d_sweep(const float *in, float *out, int nx, int ny, stencil2d_coeffs c);
void cpu_stencil2d_periodic_sweep(const float *in, float *out, int nx, int ny,
                                  stencil2d_coeffs c);
/* `steps` Dirichlet sweeps a -> b -> a ...; returns the buffer holding the
 * result (a for even steps, b for odd). */
float *cpu_stencil2d_run(float *a, float *b, int nx, int ny, stencil2d_coeffs c, int steps);
void cpu_stencil3d_sweep(const float *in, float *out, int nx, int ny, int nz,
                         stencil3d_coeffs c);
/* Lab 7.  jacobi_sweep in float, in the order written in stencil_lab.h
 * (boundary cells copied); u and unew must not overlap. */
void cpu_jacobi_sweep(const float *u, float *unew, const float *f, int nx, int ny, float h);
/* sum(r^2) over the interior, each r evaluated in double from the float
 * inputs and the squares summed in long double: within a few units of
 * double's last place of the exact sum of the double r^2 (0 on a grid
 * without interior). */
double cpu_residual_norm2(const float *u, const float *f, int nx, int ny, float h);

/*
 * Lab 7's model problem on the unit square, an n-by-n grid, h = 1/(n-1):
 * laplace(u) = f with f = 2 pi^2 sin(pi x) sin(pi y) and u = 0 on the
 * boundary; the solution is u* = -sin(pi x) sin(pi y).
 * harness_poisson_model_f fills f[0..n*n) (row-major, x fastest).
 * harness_poisson_discretisation_error(n) is how far the exact solution of
 * the 5-point discretisation lies from u* at the centre, relative to |u*|:
 * 2 pi^2 / lambda_h - 1 with lambda_h = 8 sin^2(pi h / 2) / h^2, the discrete
 * Laplacian's eigenvalue of that mode (about pi^2 h^2 / 12).
 * Jacobi reduces this problem's error and residual by exactly cos(pi h) per
 * sweep (Barrett et al., "Templates for the Solution of Linear Systems",
 * SIAM 1994, section 2.2.1).
 */
void harness_poisson_model_f(float *f, int n);
double harness_poisson_discretisation_error(int n);

/* -------------------------------------------------------------- comparison */

/* The outcome of one comparison; message is empty when ok. */
typedef struct {
    int ok;
    size_t mismatches;
    char message[2048];
} harness_report;

enum { HARNESS_MAX_REPORTED = 5 };   /* mismatches listed with coordinates */

/*
 * Compares every cell of got with want: a cell passes when
 *   |got - want| <= atol + rtol * |want|
 * (a NaN never passes).  dirichlet_dims is 2 or 3 for a Dirichlet problem of
 * that many dimensions, whose boundary cells (see harness_is_boundary) must be
 * bit-identical to want, or 0 when no cell is a copied boundary cell.
 * Appends the first HARNESS_MAX_REPORTED mismatches, with coordinates, to
 * r->message and returns r->ok.
 */
int harness_compare(const float *got, const float *want, int nx, int ny, int nz,
                    harness_tolerance tol, int dirichlet_dims, harness_report *r);

/* Whether now and before hold the same bits in every cell (an input left
 * unchanged); on a difference sets r->ok = 0, names `what` and the first
 * differing cell, and returns 0. */
int harness_unchanged(const float *now, const float *before, int nx, int ny, int nz,
                      const char *what, harness_report *r);

/* Whether cell (x, y, z) is a boundary cell of a Dirichlet problem in `dims`
 * (2 or 3) dimensions: x or y (or, in 3D, z) is 0 or its extent minus 1.  On a
 * grid 1 or 2 cells wide in such a dimension every cell is a boundary cell. */
int harness_is_boundary(int x, int y, int z, int nx, int ny, int nz, int dims);

/* ------------------------------------------------------------- statistics */

/* Median of v[0..n), n >= 1; sorts v in place. */
double harness_median(double *v, int n);
/* The median of v[0..n) (n >= 1; sorts v in place) and its 95% confidence interval
 * [*lo, *hi], distribution-free, from the order statistics (stats.c gives the source). */
double harness_median_ci(double *v, int n, double *lo, double *hi);
/* Minimum and maximum of v[0..n), n >= 1. */
double harness_min(const double *v, int n);
double harness_max(const double *v, int n);

/* Effective bandwidth in GB/s (1 GB = 1e9 bytes) of moving `bytes` in `ms`. */
double harness_gbps(double bytes, double ms);

/* ------------------------------------------------------------- the device */

typedef struct {
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t l2_bytes;
    size_t global_mem_bytes;
    size_t mem_free_bytes;
} harness_device;

/* Fills *dev for device 0 and returns 0, or returns -1 with a reason in
 * why[0..n) when there is no usable CUDA device.  Does not call harness_fail. */
int harness_probe(harness_device *dev, char *why, size_t n);

/*
 * Device grids with guard zones: harness_grid_alloc(n) returns a cudaMalloc'd
 * pointer to n floats (256-byte aligned) with HARNESS_GUARD_BYTES of a known
 * byte pattern on each side, so a kernel that writes past either end is
 * caught by harness_guards_intact() even when it does not crash.
 */
enum { HARNESS_GUARD_BYTES = 4096 };
float *harness_grid_alloc(size_t n);
void harness_grid_free(float *d);
/* 1 when both guard zones still hold their pattern; else 0 with a message. */
int harness_guards_intact(const float *d, size_t n, const char *what, harness_report *r);

/* Fills d[0..n) with NaN (every byte 0xFF) on `stream`: a cell the kernel
 * does not write stays NaN and fails the comparison. */
void harness_poison(float *d, size_t n, cudaStream_t stream);

/* Number of NaN cells in d[0..n); synchronises `stream`. */
size_t harness_count_nan(const float *d, size_t n, cudaStream_t stream);

/* ------------------------------------------- the harness's own GPU kernels */
/*
 * Used by the bench to check every timed call on fresh data without a trip to
 * the CPU: the student's code never touches these buffers.  All asynchronous
 * on `stream`; grids row-major, x fastest, as everywhere.
 */

/* d[0..n) = the values harness_fill_random(h, n, seed) gives, bit for bit
 * (SplitMix64 on integers, then an exact conversion to float). */
void harness_fill_random_device(float *d, size_t n, uint64_t seed, cudaStream_t stream);

/* The definitions of stencil_lab.h, one thread per cell, straight from global
 * memory: slow and obviously right.  in and out must not overlap. */
void harness_gpu_stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                 stencil2d_coeffs c, cudaStream_t stream);
void harness_gpu_stencil2d_periodic_sweep(const float *d_in, float *d_out, int nx, int ny,
                                          stencil2d_coeffs c, cudaStream_t stream);
void harness_gpu_stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                 stencil3d_coeffs c, cudaStream_t stream);

/* Lab 7's definitions (stencil_lab.h), as above: residual sum(r^2) over the
 * interior into *d_result (one double; summed with double atomics, so its
 * last bits vary from run to run: a check, never a reference for bits), and
 * one Jacobi sweep u -> unew. */
void harness_gpu_residual_norm2(const float *d_u, const float *d_f, int nx, int ny, float h,
                                double *d_result, cudaStream_t stream);
void harness_gpu_jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx, int ny,
                              float h, cudaStream_t stream);

/* Number of cells i in [0, n) where |got - want| > atol + rtol * |want| or
 * got is NaN (the rule of harness_compare); synchronises `stream`. */
size_t harness_count_mismatches(const float *d_got, const float *d_want, size_t n,
                                harness_tolerance tol, cudaStream_t stream);

/* A 64-bit digest of `bytes` (a multiple of 4) of device memory: equal bits give an equal
 * digest on every run; any change of bits changes it but with a chance of 2^-64.  Synchronises
 * `stream`.  (The bench's determinism repeats compare outputs by it.) */
uint64_t harness_digest(const void *d_data, size_t bytes, cudaStream_t stream);

/* Evicts the L2 cache by reading a buffer of twice its size, so each timed
 * repetition starts from DRAM with no dirty lines left to write back during
 * it (a flush by writing would leave tens of MB of them).  The buffer is
 * allocated once. */
typedef struct { void *d_buf; size_t bytes; } harness_l2_flusher;
void harness_l2_flusher_init(harness_l2_flusher *f, const harness_device *dev);
void harness_l2_flush(harness_l2_flusher *f, cudaStream_t stream);
void harness_l2_flusher_free(harness_l2_flusher *f);

/* CUDA-event timing of the work between start and stop on `stream`, with every
 * other stream a launcher can reach tied into the interval (device.cu says how).
 * `stream` must be a blocking stream (cudaStreamCreate). */
typedef struct { cudaEvent_t start, stop, join; cudaStream_t stream; } harness_timer;
void harness_timer_init(harness_timer *t, cudaStream_t stream);
void harness_timer_start(harness_timer *t);
double harness_timer_stop_ms(harness_timer *t);   /* waits for stop */
void harness_timer_free(harness_timer *t);

/*
 * Copy bandwidth of this GPU, the yardstick for every lab's score:
 * copies n floats from d_src to d_dst `reps` times each way of copying
 * (cudaMemcpyAsync device to device, and a float4 copy kernel), after one
 * warm-up each, and reports the median of each in GB/s counting bytes read
 * plus bytes written (2 * 4n per copy).  Both buffers from cudaMalloc.
 */
void harness_copy_bandwidth(const float *d_src, float *d_dst, size_t n, int reps,
                            cudaStream_t stream, double *memcpy_gbps, double *kernel_gbps);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_HARNESS_H */
