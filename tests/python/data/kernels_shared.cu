#include <cuda_runtime.h>
__global__ void plain(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2.0f;
}
__global__ void tiled(const float *in, float *out, int n) {
  __shared__ float tile[256 + 2];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x + 1] = i < n ? in[i] : 0.f;
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x] + tile[threadIdx.x + 2] + (i / 7) + (i % 5);
}
__global__ void dyn(const float *in, float *out, int n) {
  extern __shared__ float s[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = in[i];
  __syncthreads();
  out[i] = s[blockDim.x - 1 - threadIdx.x];
}
__device__ float big(int k) { float a[64]; for (int j = 0; j < 64; ++j) a[j] = j * k; return a[k & 63]; }
__global__ void spill(float *out, int k) { out[threadIdx.x] = big(k + threadIdx.x); }
extern "C" void launch(const float *in, float *out, int n) { plain<<<1,1>>>(in,out,n); }
