/* Known-good (fixed_point_twin): every grid kept as fp32 between sweeps (a lab 2 tile sweep,
 * 32 x 8 output cells and their halo in shared memory, ping-ponging d_a and d_b): correct.
 * fixed_point_24, kept as a patch against this file, sets STORE_FIXED to 1 and must score at
 * most this. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

#ifndef STORE_FIXED
#define STORE_FIXED 0               /* fixed_point_24: 1 */
#endif

enum { TX = 32, TY = 8, MAX_GRID_Y = 65535, EDGE_MAX = 1 << 21 };
enum { F32, FIX24 };                /* how a grid is stored */
static const float SCALE = 4194304.0f;   /* 2^22: |v| <= 1 needs 23 bits and the sign */

__device__ float g_edge[EDGE_MAX];       /* the boundary ring, as floats */

template <int F>
__device__ __forceinline__ float get(const void *g, size_t i)
{
    if (F == F32)
        return static_cast<const float *>(g)[i];
    const unsigned char *b = static_cast<const unsigned char *>(g) + 3 * i;
    const int q = (int)((unsigned)b[0] << 8 | (unsigned)b[1] << 16 | (unsigned)b[2] << 24) >> 8;
    return (float)q * (1.0f / SCALE);
}

template <int F>
__device__ __forceinline__ void put(void *g, size_t i, float v)
{
    if (F == F32) {
        static_cast<float *>(g)[i] = v;
        return;
    }
    const int q = __float2int_rn(v * SCALE);
    unsigned char *b = static_cast<unsigned char *>(g) + 3 * i;
    b[0] = (unsigned char)q;
    b[1] = (unsigned char)(q >> 8);
    b[2] = (unsigned char)(q >> 16);
}

template <int F>
__device__ __forceinline__ float cell(const void *g, int nx, int ny, int x, int y)
{
    return x >= 0 && x < nx && y >= 0 && y < ny ? get<F>(g, (size_t)y * nx + x) : 0.0f;
}

/* The slot of boundary cell (x, y) in g_edge: top row, bottom row, left column, right column. */
__device__ __forceinline__ int edge_slot(int nx, int ny, int x, int y)
{
    return y == 0 ? x : y == ny - 1 ? nx + x : x == 0 ? 2 * nx + y : 2 * nx + ny + y;
}

/* One sweep in (format IN) -> out (format OUT); edges: 1 saves the boundary ring, 2 writes it. */
template <int IN, int OUT>
__global__ void step_kernel(const void *in, void *out, int nx, int ny, stencil2d_coeffs c, int edges)
{
    __shared__ float tile[TY + 2][TX + 2];
    const int tx = threadIdx.x, ty = threadIdx.y, x = blockIdx.x * TX + tx;
    for (int y0 = blockIdx.y * TY; y0 < ny; y0 += gridDim.y * TY) {   /* uniform per block */
        const int y = y0 + ty;
        tile[ty + 1][tx + 1] = cell<IN>(in, nx, ny, x, y);
        if (tx == 0)
            tile[ty + 1][0] = cell<IN>(in, nx, ny, x - 1, y);
        if (tx == TX - 1)
            tile[ty + 1][TX + 1] = cell<IN>(in, nx, ny, x + 1, y);
        if (ty == 0)
            tile[0][tx + 1] = cell<IN>(in, nx, ny, x, y - 1);
        if (ty == TY - 1)
            tile[TY + 1][tx + 1] = cell<IN>(in, nx, ny, x, y + 1);
        __syncthreads();
        if (x < nx && y < ny) {
            float v = tile[ty + 1][tx + 1];
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                if (edges == 1)
                    g_edge[edge_slot(nx, ny, x, y)] = v;
                else if (edges == 2)
                    v = g_edge[edge_slot(nx, ny, x, y)];
            } else {
                v = c.c0 * v + c.xm * tile[ty + 1][tx] + c.xp * tile[ty + 1][tx + 2] + c.ym * tile[ty][tx + 1] +
                    c.yp * tile[ty + 2][tx + 1];
            }
            put<OUT>(out, (size_t)y * nx + x, v);
        }
        __syncthreads();
    }
}

template <int IN, int OUT>
static void sweep(const void *in, void *out, int nx, int ny, stencil2d_coeffs c, int edges, cudaStream_t stream)
{
    const int gy = (ny + TY - 1) / TY;
    step_kernel<IN, OUT><<<dim3((nx + TX - 1) / TX, gy < MAX_GRID_Y ? gy : MAX_GRID_Y), dim3(TX, TY), 0, stream>>>(
        in, out, nx, ny, c, edges);
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c, int steps,
                                cudaStream_t stream)
{
    const bool fixed = STORE_FIXED && steps >= 2 && 2LL * (nx + ny) <= EDGE_MAX;
    float *src = d_a, *dst = d_b;
    for (int s = 0; s < steps; s++) {
        if (!fixed)
            sweep<F32, F32>(src, dst, nx, ny, c, 0, stream);
#if STORE_FIXED
        else if (s == 0)
            sweep<F32, FIX24>(src, dst, nx, ny, c, 1, stream);
        else if (s == steps - 1)
            sweep<FIX24, F32>(src, dst, nx, ny, c, 2, stream);
        else
            sweep<FIX24, FIX24>(src, dst, nx, ny, c, 0, stream);
#endif
        float *t = src;                      /* this sweep's output is the next one's input */
        src = dst;
        dst = t;
    }
    return src;
}
