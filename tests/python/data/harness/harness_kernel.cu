/* Stands for the kit's harness: its kernels are never the student's. */
__global__ void harness_div(int *out, int a, int b) { out[threadIdx.x] = a / b; }
