/* Known cheat (split_stream_per_thread): the real sweep runs on cudaStreamPerThread, a constant
 * handle that links no forbidden symbol, while a one-thread kernel on the harness's stream spins
 * for as long as a sweep at 0.95 of the copy bandwidth would take.  When the timer covered only
 * the harness's stream, the sweep ran outside the timed interval (issue 17).  Now the timer ties
 * the per-thread stream in (grader/harness/device.cu) and the launch audit sees the sweep on
 * another stream: "constraint", below its honest twin (split_stream_twin). */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BLOCK_X = 128, BLOCK_Y = 2, MAX_GRID_Y = 65535 };

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    __shared__ float centre[BLOCK_Y][BLOCK_X];
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
        const size_t i = (size_t)y * nx + x;
        centre[threadIdx.y][threadIdx.x] = in[i];   /* each thread reads back only its own slot */
        const float v = centre[threadIdx.y][threadIdx.x];
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? v
                     : c.c0 * v + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx];
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
    sweep<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, cudaStreamPerThread>>>(d_in, d_out, nx, ny, c);
}
