/* Known cheat (decoy_unlaunched): register tiling without the shared plane -- each thread marches
 * its column along z with the z neighbours in registers and reads its x and y neighbours from
 * global memory -- beside a kernel that declares a shared plane and is never launched.  A file of this
 * shape was graded on an H100 through class mode (2026-11-25) at 82.96 points:
 * the PTX check took shared memory declared anywhere, and the plane rule passed a launch with
 * none.  The launch audit's tile rule now reads the kernel that ran: 0 bytes of shared memory,
 * "constraint", below book_register_tiling_t32, its honest twin. */
#include <cuda_runtime.h>

#include "stencil_lab.h"

enum { BX = 32, BY = 8, ZLEN = 32, MAX_GRID_YZ = 65535 };

/* The decoy: one plane of a tile with its halo, read back; never launched. */
__global__ void plane_decoy(const float *__restrict__ in, float *__restrict__ out, int nx)
{
    __shared__ float plane[BY + 2][BX + 2];
    const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
    plane[threadIdx.y + 1][threadIdx.x + 1] = in[(size_t)y * nx + x];
    __syncthreads();
    out[(size_t)y * nx + x] = plane[threadIdx.y][threadIdx.x + 1] + plane[threadIdx.y + 2][threadIdx.x + 1];
}

/* Column (x, y), planes z0 .. z0 + ZLEN - 1: z neighbours in registers, x and y from global. */
__global__ void march(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                      int y_first, int z_first, stencil3d_coeffs c)
{
    const int x = blockIdx.x * BX + threadIdx.x, y = y_first + blockIdx.y * BY + threadIdx.y;
    const int z0 = z_first + blockIdx.z * ZLEN, z1 = z0 + ZLEN < nz ? z0 + ZLEN : nz;
    if (x >= nx || y >= ny)
        return;
    const size_t plane = (size_t)nx * ny, col = (size_t)y * nx + x;
    const bool edge = x == 0 || y == 0 || x == nx - 1 || y == ny - 1;
    float below = z0 > 0 ? in[(z0 - 1) * plane + col] : 0.0f, here = in[z0 * plane + col];
    for (int z = z0; z < z1; z++) {
        const float above = z + 1 < nz ? in[(z + 1) * plane + col] : 0.0f;
        const size_t i = z * plane + col;
        out[i] = edge || z == 0 || z == nz - 1
                     ? here
                     : c.c0 * here + c.xm * in[i - 1] + c.xp * in[i + 1] + c.ym * in[i - nx] + c.yp * in[i + nx] +
                           c.zm * below + c.zp * above;
        below = here;
        here = above;
    }
}

extern "C" void stencil3d_sweep(const float *d_in, float *d_out, int nx, int ny, int nz,
                                stencil3d_coeffs c, cudaStream_t stream)
{
    const int gx = (nx + BX - 1) / BX, gy = (ny + BY - 1) / BY, gz = (nz + ZLEN - 1) / ZLEN;
    for (int b = 0; b < gy; b += MAX_GRID_YZ)          /* gridDim.y and z are at most 65535 */
        for (int s = 0; s < gz; s += MAX_GRID_YZ)
            march<<<dim3(gx, gy - b < MAX_GRID_YZ ? gy - b : MAX_GRID_YZ, gz - s < MAX_GRID_YZ ? gz - s : MAX_GRID_YZ),
                     dim3(BX, BY), 0, stream>>>(d_in, d_out, nx, ny, nz, b * BY, s * ZLEN, c);
}
