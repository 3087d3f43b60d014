/*
 * Known-good submission for lab 8: the overlapped tile, the other design of
 * the handout (the reference streams rows through a register pipeline).
 *
 * A block owns a TX x TY = 128 x 64 output tile.  For a pass of KS sweeps it
 * loads the tile plus a halo of KS cells on every side into shared memory
 * (144 x 80 cells for KS = 8), then applies the KS sweeps in shared memory,
 * ping-ponging two buffers: sweep s computes the region s cells inside the
 * loaded one (the valid region shrinks by one cell per sweep on each side),
 * one __syncthreads() between sweeps.  After KS sweeps the inner TX x TY
 * cells are exact and are written out.  Neighbouring tiles load and compute
 * the same halo cells: the redundant work the handout derives.
 *
 * Every update is rounded like the CPU reference (__fmul_rn, __fadd_rn), so
 * the result is bitwise equal to KS separate sweeps.  Cells outside the grid
 * are loaded as 0 and keep it; boundary cells keep their value.
 * blockDim (32, 8); dynamic shared memory 2 * (TY+2KS) * (TX+2KS+1) * 4 bytes
 * (92,800 for KS = 8, above the default 48 KB: cudaFuncSetAttribute raises
 * the limit).  Any nx, ny >= 1; a 1D grid of tiles (no gridDim.y limit).
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int K_MAX = 8;
constexpr int TX = 128, TY = 64;             /* output tile */
constexpr int BX = 32, BY = 8;               /* threads */

__device__ __forceinline__ float stencil_point(const stencil2d_coeffs &c, float centre, float xm,
                                               float xp, float ym, float yp)
{
    float s = __fmul_rn(c.c0, centre);
    s = __fadd_rn(s, __fmul_rn(c.xm, xm));
    s = __fadd_rn(s, __fmul_rn(c.xp, xp));
    s = __fadd_rn(s, __fmul_rn(c.ym, ym));
    return __fadd_rn(s, __fmul_rn(c.yp, yp));
}

__host__ __device__ constexpr int in_x(int ks) { return TX + 2 * ks; }
__host__ __device__ constexpr int in_y(int ks) { return TY + 2 * ks; }
__host__ __device__ constexpr int pitch(int ks) { return in_x(ks) + 1; }   /* +1: fewer bank conflicts */

template <int KS>
__global__ void __launch_bounds__(BX * BY)
overlapped_tile_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny,
                       int tiles_x, stencil2d_coeffs c)
{
    constexpr int IX = in_x(KS), IY = in_y(KS), P = pitch(KS);
    extern __shared__ float smem[];
    float *buf0 = smem, *buf1 = smem + IY * P;

    const int ty_idx = blockIdx.x / tiles_x, tx_idx = blockIdx.x - ty_idx * tiles_x;
    const int gx0 = tx_idx * TX - KS, gy0 = ty_idx * TY - KS;   /* grid cell of tile slot (0, 0) */
    const int tx = threadIdx.x, ty = threadIdx.y;

    for (int r = ty; r < IY; r += BY) {
        const int gy = gy0 + r;
        for (int q = tx; q < IX; q += BX) {
            const int gx = gx0 + q;
            buf0[r * P + q] = (gx >= 0 && gx < nx && gy >= 0 && gy < ny) ? in[(size_t)gy * nx + gx] : 0.0f;
        }
    }
    __syncthreads();

#pragma unroll
    for (int s = 1; s <= KS; s++) {
        const float *src = (s & 1) ? buf0 : buf1;
        float *dst = (s & 1) ? buf1 : buf0;
        for (int r = s + ty; r < IY - s; r += BY) {            /* the region still valid after s sweeps */
            const int gy = gy0 + r;
            const bool row_inner = gy > 0 && gy < ny - 1;
            for (int q = s + tx; q < IX - s; q += BX) {
                const int gx = gx0 + q;
                const float *p = src + r * P + q;
                float v = *p;
                if (row_inner && gx > 0 && gx < nx - 1)
                    v = stencil_point(c, v, p[-1], p[1], p[-P], p[P]);
                dst[r * P + q] = v;
            }
        }
        __syncthreads();                                       /* sweep s complete before s+1 reads it */
    }

    const float *fin = (KS & 1) ? buf1 : buf0;
    for (int r = ty; r < TY; r += BY) {
        const int gy = gy0 + KS + r;
        if (gy >= ny)
            break;
        for (int q = tx; q < TX; q += BX) {
            const int gx = gx0 + KS + q;
            if (gx < nx)
                out[(size_t)gy * nx + gx] = fin[(r + KS) * P + q + KS];
        }
    }
}

template <int KS>
static void launch_pass(const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                        cudaStream_t stream)
{
    const int smem = 2 * in_y(KS) * pitch(KS) * (int)sizeof(float);
    cudaFuncSetAttribute(overlapped_tile_kernel<KS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles_x = (nx + TX - 1) / TX, tiles_y = (ny + TY - 1) / TY;
    overlapped_tile_kernel<KS><<<tiles_x * tiles_y, dim3(BX, BY), smem, stream>>>(in, out, nx, ny,
                                                                                tiles_x, c);
}

static void pass(int k, const float *in, float *out, int nx, int ny, stencil2d_coeffs c,
                 cudaStream_t stream)
{
    switch (k) {
    case 1: launch_pass<1>(in, out, nx, ny, c, stream); break;
    case 2: launch_pass<2>(in, out, nx, ny, c, stream); break;
    case 3: launch_pass<3>(in, out, nx, ny, c, stream); break;
    case 4: launch_pass<4>(in, out, nx, ny, c, stream); break;
    case 5: launch_pass<5>(in, out, nx, ny, c, stream); break;
    case 6: launch_pass<6>(in, out, nx, ny, c, stream); break;
    case 7: launch_pass<7>(in, out, nx, ny, c, stream); break;
    default: launch_pass<8>(in, out, nx, ny, c, stream); break;
    }
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    if (steps <= 0)
        return d_a;
    int passes = (steps + K_MAX - 1) / K_MAX;     /* same parity as steps: see the reference */
    if ((passes - steps) % 2 != 0)
        passes++;
    const int base = steps / passes, longer = steps % passes;
    float *src = d_a, *dst = d_b;
    for (int p = 0; p < passes; p++) {
        pass(base + (p < longer ? 1 : 0), src, dst, nx, ny, c, stream);
        float *tmp = src;
        src = dst;
        dst = tmp;
    }
    return src;
}
