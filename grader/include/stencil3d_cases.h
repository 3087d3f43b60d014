/*
 * stencil3d_cases.h -- the correctness cases of stencil3d_sweep, one 3D 7-point
 * sweep with a fixed (Dirichlet) boundary: the one table of labs 5 and 6
 * (check_05.c, check_06.c), which share the kind and so every case.
 *
 * The sizes straddle the tiles of both labs' kernels: 128 or 32 cells along x
 * (a warp of float4 loads or of 4-byte loads; widths that are multiples of 4
 * take the 16-byte path, others the scalar one); 16 rows along y (lab 5's
 * reference), 14 (lab 6's) and the textbook's 6 and 30; nz below, at and above
 * the stack of planes one block marches through (the coarsening factor: 32 in
 * lab 5's reference, 30 in the textbook's kernels, and 16; lab 6's reference
 * cuts each column into stretches whose length follows nz).  Degenerate
 * grids are 1 or 2 cells thin in some axis, so that every cell is a copied
 * boundary cell, or only a thin core is updated.  The large grids pass CUDA's
 * limit of 65535 blocks along y and z with every tile height and plane stack
 * above.
 */
#ifndef STENCIL3D_CASES_H
#define STENCIL3D_CASES_H

#include "lab_driver.h"

static const lab_case STENCIL3D_CASES[] = {
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
    { "tile-edges",  128,       8,       6, 1 },
    { "tile-edges",  129,      17,       4, 1 },
    { "tile-edges",  129,       7,       4, 1 },
    { "tile-edges",  132,      15,       9, 1 },   /* float4 path, a 4-cell tail tile */
    { "tile-edges",  132,      17,       9, 1 },
    { "tile-edges",  257,      33,       7, 1 },
    { "tile-edges",   33,      31,       7, 1 },   /* around the 32-cell tile of 4-byte loads */
    { "tile-edges",   31,      32,      30, 1 },
    { "tile-edges",   64,      30,       5, 1 },
    { "tile-edges",   20,      31,       5, 1 },   /* heights around 14, 16 and 30 rows */
    { "tile-edges",   36,      32,       3, 1 },
    { "tile-edges",   36,      33,       3, 1 },
    { "tile-edges",   33,       7,       8, 1 },   /* around the textbook's 6 x 6 x 6 output tile */
    { "z-march",      20,      12,       2, 1 },   /* nz below, at and above the planes per block */
    { "z-march",      20,      12,      15, 1 },
    { "z-march",      20,      12,      16, 1 },
    { "z-march",      20,      12,      17, 1 },
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
    { "large",      2048,     640,       3, 1 },
    { "large",       516,     260,      70, 1 },
    { "large",         4, 2000001,       3, 1 },   /* taller than 65535 tiles of 14, 16 or 30 rows: gridDim.y */
    { "large",         3,       3, 2200001, 1 },   /* deeper than 65535 stacks of 30 or 32 planes: gridDim.z */
    { "large",         4,       3, 2200001, 1 },   /* the same on the float4 path */
};

#define STENCIL3D_NCASES ((int)(sizeof STENCIL3D_CASES / sizeof STENCIL3D_CASES[0]))

#endif /* STENCIL3D_CASES_H */
