/* Kernels for the launch audit's PTX rules (tests/python/test_launches.py). */
#include <cuda_fp16.h>

/* A 16 x 16 output tile with its halo ring, read back: the tile the lab teaches. */
__global__ void tile_read(const float *in, float *out, int nx)
{
    __shared__ float tile[18][18];
    const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    tile[threadIdx.y + 1][threadIdx.x + 1] = in[y * nx + x];
    if (threadIdx.x == 0) tile[threadIdx.y + 1][0] = in[y * nx + x - 1];
    if (threadIdx.x == 15) tile[threadIdx.y + 1][17] = in[y * nx + x + 1];
    if (threadIdx.y == 0) tile[0][threadIdx.x + 1] = in[(y - 1) * nx + x];
    if (threadIdx.y == 15) tile[17][threadIdx.x + 1] = in[(y + 1) * nx + x];
    __syncthreads();
    out[y * nx + x] = tile[threadIdx.y + 1][threadIdx.x] + tile[threadIdx.y + 1][threadIdx.x + 2]
                    + tile[threadIdx.y][threadIdx.x + 1] + tile[threadIdx.y + 2][threadIdx.x + 1];
}

/* Only the five weights in shared memory: 20 bytes. */
__global__ void weights_only(const float *in, float *out, int nx, const float *w)
{
    __shared__ float c[5];
    if (threadIdx.x < 5) c[threadIdx.x] = w[threadIdx.x];
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = c[0] * in[i] + c[1] * in[i - 1] + c[2] * in[i + 1] + c[3] * in[i - nx] + c[4] * in[i + nx];
}

/* A tile written and never read (volatile, or nvcc would drop it): the stencil reads global memory. */
__global__ void tile_write_only(const float *in, float *out, int nx)
{
    volatile __shared__ float tile[18][18];
    const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y, i = y * nx + x;
    tile[threadIdx.y + 1][threadIdx.x + 1] = in[i];
    out[i] = in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx];
}

/* One cell per thread from global memory, no shared memory: what a decoy sits beside. */
__global__ void plain(const float *in, float *out, int nx)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx];
}

/* A sweep that keeps its grid as 3 bytes a cell: 24-bit fixed point. */
__global__ void fixed_point_store(const float *in, unsigned char *out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int q = __float2int_rn(in[i] * 4194304.0f);
    out[3 * i] = q & 255; out[3 * i + 1] = (q >> 8) & 255; out[3 * i + 2] = (q >> 16) & 255;
}

/* A grid kept as half precision between sweeps. */
__global__ void half_store(const float *in, __half *out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(in[i] * 0.5f);
}
