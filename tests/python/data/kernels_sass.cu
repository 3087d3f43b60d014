/* Kernels for the machine-code rules (tests/python/test_sass.py): a float4 load,
 * floating-point atomics, a compare-and-swap loop, an integer ticket, and inline PTX that hides
 * a rem.s32 after a second instruction on one line and after a brace in a block comment, integer
 * division in C (32- and 64-bit), and float division and a constant divisor, which are none. */
__global__ void float_atomics(const float *in, double *sum, float *fsum)
{
    const float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    atomicAdd(sum, (double)v);
    atomicAdd(fsum, v);
}

__global__ void cas_add(const float *in, double *sum)
{
    const double v = in[blockIdx.x * blockDim.x + threadIdx.x];
    unsigned long long *p = (unsigned long long *)sum, old = *p, seen;
    do {
        seen = old;
        old = atomicCAS(p, seen, __double_as_longlong(__longlong_as_double(seen) + v));
    } while (old != seen);
}

__device__ unsigned g_ticket;

__global__ void integer_ticket(const float *in, float *partial)
{
    partial[blockIdx.x] = in[blockIdx.x];
    if (threadIdx.x == 0) partial[gridDim.x] = (float)atomicAdd(&g_ticket, 1u);
}

__global__ void ptx_two_per_line(int *out, int a, int b)
{
    int r;
    asm("{ .reg .s32 t; mov.s32 t, %1; rem.s32 %0, t, %2; }" : "=r"(r) : "r"(a), "r"(b));
    out[threadIdx.x] = r;
}

__global__ void ptx_brace_in_comment(int *out, int a, int b)
{
    int r;
    asm("/* } */ rem.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    out[threadIdx.x] = r;
}

__global__ void float4_load(const float4 *in, float *out)
{
    const float4 v = in[blockIdx.x * blockDim.x + threadIdx.x];
    out[blockIdx.x * blockDim.x + threadIdx.x] = v.x + v.y + v.z + v.w;
}

__global__ void c_divide(int *out, int n, int d)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const long long j = (long long)i * n;
    out[i] = i / d + i % d + (int)(j / d);
}

/* No integer division: a float one, and a constant divisor (a multiply). */
__global__ void no_integer_divide(float *out, float d, int n)
{
    out[threadIdx.x] = out[threadIdx.x] / d + (float)(n / 7);
}
