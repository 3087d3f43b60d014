/* Known-bad (raw_syscall): harmless_names's correct kernel, whose launcher talks to the
 * operating system without any library call: inline assembly issues the write system call
 * directly (it could as well open a file or start a process).  No symbol betrays it, but the
 * host code holds a `syscall` instruction, which the grader finds by disassembling the object:
 * "forbidden". */
#include <cuda_runtime.h>

#include "stencil_lab.h"

static long raw_write(int fd, const char *text, long length)
{
#if defined(__x86_64__)
    long result;
    asm volatile("syscall"
                 : "=a"(result)
                 : "a"(1L), "D"((long)fd), "S"(text), "d"(length)
                 : "rcx", "r11", "memory");
    return result;
#elif defined(__aarch64__)
    register long x0 asm("x0") = fd;
    register long x1 asm("x1") = (long)text;
    register long x2 asm("x2") = length;
    register long x8 asm("x8") = 64; /* write */
    asm volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
    return x0;
#else
#error "raw_syscall is written for x86-64 and AArch64 hosts"
#endif
}

__global__ void sweep(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                      stencil2d_coeffs c)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nx)
        return;
    for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y) {
        const size_t i = (size_t)y * nx + x;
        out[i] = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                     ? in[i]
                     : c.c0 * in[i] + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] +
                           c.yp * in[i + nx];
    }
}

extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    raw_write(2, "launching\n", 10);
    const int blocks_y = (ny + 1) / 2;
    const dim3 grid((nx + 127) / 128, blocks_y < 65535 ? blocks_y : 65535);
    sweep<<<grid, dim3(128, 2), 0, stream>>>(d_in, d_out, nx, ny, c);
}
