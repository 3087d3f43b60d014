// Test data for the "max shared planes" check (lab 6): see tests/python/data/README.md.
#include <cuda_pipeline.h>

// One plane of a 128 x 8 tile (float4 per thread) plus halo rows: 10 x 136 floats.
__global__ void __launch_bounds__(320) one_plane_v4(const float *__restrict__ in, float *out, int n)
{
    __shared__ __align__(16) float plane[10][136];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    float4 v = __ldg(reinterpret_cast<const float4 *>(in) + threadIdx.x);
    *reinterpret_cast<float4 *>(&plane[ty][4 + 4 * tx]) = v;
    __syncthreads();
    if (ty > 0 && ty < 9)
        out[threadIdx.x] = plane[ty - 1][4 + 4 * tx] + plane[ty + 1][4 + 4 * tx] + v.x;
}

// Three planes of a 32 x 32 tile, 4-byte loads: lab 5's design, not lab 6's.
__global__ void __launch_bounds__(1024) three_planes(const float *__restrict__ in, float *out, int n)
{
    __shared__ float prev[32][32], curr[32][32], next[32][32];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    prev[ty][tx] = in[threadIdx.x];
    curr[ty][tx] = in[threadIdx.x + n];
    next[ty][tx] = in[threadIdx.x + 2 * n];
    __syncthreads();
    out[threadIdx.x] = prev[ty][tx] + curr[(ty + 1) % 32][tx] + next[ty][(tx + 1) % 32];
}

// One plane, but no __launch_bounds__: the block size is unknown.
__global__ void no_bounds(const float *__restrict__ in, float *out, int n)
{
    __shared__ float plane[34 * 10];
    plane[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = plane[(threadIdx.x + 1) % 340];
}

// Dynamic shared memory: sized at launch.
__global__ void __launch_bounds__(256) dynamic_plane(const float *__restrict__ in, float *out, int n)
{
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = dyn[(threadIdx.x + 1) % 256];
}

// Shared memory filled by 16-byte cp.async copies: the width comes from cp.async.
__global__ void __launch_bounds__(128) async_plane(const float *__restrict__ in, float *out, int n)
{
    __shared__ __align__(16) float4 row[128];
    __pipeline_memcpy_async(&row[threadIdx.x], reinterpret_cast<const float4 *>(in) + threadIdx.x, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    out[threadIdx.x] = row[(threadIdx.x + 1) % 128].x;
}

// The exact block shape, Hopper and later: .reqntid 32, 8, 1.
__global__ void __block_size__((32, 8, 1)) exact_shape(const float *__restrict__ in, float *out, int n)
{
    __shared__ float plane[10][34];
    plane[threadIdx.y + 1][threadIdx.x + 1] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = plane[threadIdx.y][threadIdx.x + 1] + plane[threadIdx.y + 2][threadIdx.x + 1];
}

// No shared memory at all.
__global__ void __launch_bounds__(256) plain(const float *__restrict__ in, float *out, int n)
{
    out[threadIdx.x] = in[threadIdx.x] * 2.0f;
}
