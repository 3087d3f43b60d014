/* Known-good (good_tiled_pingpong): a different correct design -- every step
 * is a plain shared-memory tile sweep (32 x 8 outputs per block, one cell per
 * thread, rim threads also loading the halo), for any nx, and the steps
 * ping-pong the two buffers on the stream.  No float4, no march: its speed
 * may differ from the reference's. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

constexpr int ORDER = 1;
constexpr int TILE_X = 32;
constexpr int TILE_Y = 8;
constexpr int IN_TILE_X = TILE_X + 2 * ORDER;
constexpr int IN_TILE_Y = TILE_Y + 2 * ORDER;
constexpr int MAX_GRID_Y = 65535;

__device__ __forceinline__ float cell_or_zero(const float *__restrict__ in, int nx, int ny, int x,
                                              int y)
{
    return (x >= 0 && x < nx && y >= 0 && y < ny) ? in[(size_t)y * nx + x] : 0.0f;
}

__global__ void __launch_bounds__(TILE_X * TILE_Y)
step_kernel(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int y_first,
            stencil2d_coeffs c)
{
    __shared__ float tile[IN_TILE_Y][IN_TILE_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = blockIdx.x * TILE_X + tx;
    const int y = y_first + blockIdx.y * TILE_Y + ty;
    const int r = ty + ORDER, s = tx + ORDER;

    tile[r][s] = cell_or_zero(in, nx, ny, x, y);
    if (tx == 0)
        tile[r][0] = cell_or_zero(in, nx, ny, x - 1, y);
    if (tx == TILE_X - 1)
        tile[r][IN_TILE_X - 1] = cell_or_zero(in, nx, ny, x + 1, y);
    if (ty == 0)
        tile[0][s] = cell_or_zero(in, nx, ny, x, y - 1);
    if (ty == TILE_Y - 1)
        tile[IN_TILE_Y - 1][s] = cell_or_zero(in, nx, ny, x, y + 1);
    __syncthreads();

    if (x >= nx || y >= ny)
        return;
    float v = tile[r][s];
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1)
        v = c.c0 * tile[r][s] + c.xm * tile[r][s - 1] + c.xp * tile[r][s + 1] +
            c.ym * tile[r - 1][s] + c.yp * tile[r + 1][s];
    out[(size_t)y * nx + x] = v;
}

extern "C" float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c,
                                int steps, cudaStream_t stream)
{
    const int bx = (nx + TILE_X - 1) / TILE_X;
    const int by = (ny + TILE_Y - 1) / TILE_Y;
    float *src = d_a, *dst = d_b;
    for (int step = 0; step < steps; step++) {
        for (int b = 0; b < by; b += MAX_GRID_Y) {
            const dim3 grid(bx, by - b < MAX_GRID_Y ? by - b : MAX_GRID_Y);
            step_kernel<<<grid, dim3(TILE_X, TILE_Y), 0, stream>>>(src, dst, nx, ny, b * TILE_Y, c);
        }
        float *tmp = src;
        src = dst;
        dst = tmp;
    }
    return src;
}
