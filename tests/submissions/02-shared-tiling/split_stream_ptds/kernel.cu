/* Known cheat (split_stream_ptds): the launch goes through the per-thread-default-stream entry
 * point, as `nvcc --default-stream per-thread` would make it: stream 0 is then this host
 * thread's per-thread stream, not the legacy default stream.  The grader builds with its own
 * flags, and `#define CUDA_API_PER_THREAD_DEFAULT_STREAM` in the file comes too late (nvcc
 * includes cuda_runtime.h before the file's first line), so the file declares the _ptsz entry
 * point itself; the symbol whitelist allows it like every _ptsz twin of an allowed call.  The
 * real sweep goes there, the decoy spins on the harness's stream.  The timer ties the
 * per-thread stream in and the audit reports it: "constraint", below tile_twin. */
#include <cuda_runtime.h>

/* cudaLaunchKernel's per-thread-default-stream twin in libcudart (cuda_runtime_api.h declares
 * it only under CUDA_API_PER_THREAD_DEFAULT_STREAM). */
extern "C" cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                             size_t shared_bytes, cudaStream_t stream);

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

/* Cell (x, y) of the input, or 0 outside the grid. */
__device__ __forceinline__ float cell(const float *__restrict__ in, int nx, int ny, int x, int y)
{
    return x >= 0 && x < nx && y >= 0 && y < ny ? in[(size_t)y * nx + x] : 0.0f;
}

/* One thread per cell; the block's two rows and their halo (a cell on each side, a row above
 * and below) are staged in a shared tile, and the stencil reads its neighbours there. */
__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    __shared__ float tile[BLOCK_Y + 2][BLOCK_X + 2];   /* tile[r][s]: cell (x0 - 1 + s, y0 - 1 + r) */
    const int tx = threadIdx.x, ty = threadIdx.y, x = blockIdx.x * BLOCK_X + tx;
    for (int y0 = blockIdx.y * BLOCK_Y; y0 < ny; y0 += gridDim.y * BLOCK_Y) {   /* uniform per block */
        const int y = y0 + ty;
        tile[ty + 1][tx + 1] = cell(in, nx, ny, x, y);
        if (tx == 0)
            tile[ty + 1][0] = cell(in, nx, ny, x - 1, y);
        if (tx == BLOCK_X - 1)
            tile[ty + 1][BLOCK_X + 1] = cell(in, nx, ny, x + 1, y);
        if (ty == 0)
            tile[0][tx + 1] = cell(in, nx, ny, x, y - 1);
        if (ty == BLOCK_Y - 1)
            tile[BLOCK_Y + 1][tx + 1] = cell(in, nx, ny, x, y + 1);
        __syncthreads();
        if (x < nx && y < ny) {
            const size_t i = (size_t)y * nx + x;
            const float v = tile[ty + 1][tx + 1];
            const float r = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                                ? v
                                : c.c0 * v + c.xm * tile[ty + 1][tx] + c.xp * tile[ty + 1][tx + 2] +
                                      c.ym * tile[ty][tx + 1] + c.yp * tile[ty + 2][tx + 1];
            out[i] = r;
        }
        __syncthreads();                               /* the tile is refilled next round */
    }
}

/* The decoy: one thread on the stream the harness times, spinning for as long as a sweep at
 * about 0.95 of an H100's copy bandwidth would take (8 bytes per cell at 2.8 TB/s), measured in
 * SM clock cycles at the GPU's clock rate. */
__global__ void spin(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

static long long decoy_cycles(int nx, int ny)
{
    int device = 0, khz = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
    const double ms = 8.0 * nx * ny / 2.8e9;
    return (long long)(ms * khz);
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    const int blocks_y = (ny + BLOCK_Y - 1) / BLOCK_Y;
    const dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, blocks_y < MAX_GRID_Y ? blocks_y : MAX_GRID_Y);
    spin<<<1, 1, 0, stream>>>(decoy_cycles(nx, ny));
    void *args[] = {(void *)&d_in, (void *)&d_out, (void *)&nx, (void *)&ny, (void *)&c};
    cudaLaunchKernel_ptsz((const void *)sweep, grid, dim3(BLOCK_X, BLOCK_Y), args, 0, 0);
}
