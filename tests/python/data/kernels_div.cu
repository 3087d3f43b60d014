__device__ __noinline__ int helper(int a, int b) { return a / b + a % b; }
__global__ void divk(int *out, int n, int d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long j = (long long)i * n;
  if (i < n) out[i] = i / d + i % d + helper(i, d) + (int)(j / d) + (unsigned)i / (unsigned)d;
}
__global__ void fdiv(float *out, float d) { out[threadIdx.x] = out[threadIdx.x] / d; }
__global__ void spill(float *out, int k) { float a[64]; for (int j = 0; j < 64; ++j) a[j] = out[j*k]; out[threadIdx.x] = a[k & 63] + a[(k+5)&63]; }
