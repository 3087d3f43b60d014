/*
 * check_05.c -- lab 5's correctness cases: stencil3d_sweep, one 3D 7-point
 * sweep with a fixed (Dirichlet) boundary, computed by a block that marches
 * along z.
 *
 * The sizes straddle the tiles of lab 5's kernels: 128 cells along x (a warp
 * of float4 loads; widths that are multiples of 4 take the 16-byte path,
 * others the scalar one), 16 rows along y (the reference) and the textbook's
 * 6 and 30; and nz below, at and above the stack of planes one block marches
 * through (the coarsening factor: 32 in the reference, 30 in the textbook).
 * Degenerate grids are 1 or 2 cells thin in some axis, so that every cell is
 * a copied boundary cell, or only a thin core is updated.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx       ny       nz  steps */
    { "degenerate",    1,       1,       1, 1 },
    { "degenerate",    1,      40,       1, 1 },
    { "degenerate",   40,       1,       1, 1 },
    { "degenerate",    1,       1,      40, 1 },
    { "degenerate",    2,       2,       2, 1 },
    { "degenerate",    3,       3,       3, 1 },
    { "degenerate",    8,       5,       2, 1 },   /* float4 path, every cell a boundary cell */
    { "degenerate",    4,       4,       4, 1 },   /* float4 path, a 2x2x2 core */
    { "tile-edges",  127,       9,       5, 1 },   /* widths around the 128-cell tile */
    { "tile-edges",  128,      16,       6, 1 },
    { "tile-edges",  129,      17,       4, 1 },
    { "tile-edges",  132,      15,       9, 1 },   /* float4 path, a 4-cell tail tile */
    { "tile-edges",  257,      33,       7, 1 },
    { "tile-edges",   20,      31,       5, 1 },   /* heights around 16 and 30 rows */
    { "tile-edges",   36,      32,       3, 1 },
    { "tile-edges",   33,       7,       8, 1 },   /* around the textbook's 6 x 6 x 6 output tile */
    { "z-march",      20,      12,       2, 1 },   /* nz below, at and above the planes per block */
    { "z-march",      20,      12,      29, 1 },
    { "z-march",      20,      12,      31, 1 },
    { "z-march",      20,      12,      32, 1 },
    { "z-march",      20,      12,      33, 1 },
    { "z-march",      36,      20,      64, 1 },
    { "z-march",      65,       9,     333, 1 },
    { "z-march",       3,       3,    1000, 1 },
    { "rectangular", 1000,      3,       3, 1 },
    { "rectangular",   3,    1000,       3, 1 },
    { "rectangular", 300,     129,       9, 1 },
    { "rectangular", 1001,     30,      20, 1 },
    { "large",      1030,    1030,      34, 1 },   /* more than one wave of blocks */
    { "large",         4, 1100001,       3, 1 },   /* taller than 65535 tiles of 16 rows: gridDim.y */
    { "large",         3,       3, 2200001, 1 },   /* deeper than 65535 stacks of 32 planes: gridDim.z */
    { "large",         4,       3, 2200001, 1 },   /* the same on the float4 path */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab05: z-coarsening", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
