/*
 * check_06.c -- lab 6's correctness cases: stencil3d_sweep, one 3D 7-point
 * sweep with a fixed (Dirichlet) boundary, computed with register tiling.
 *
 * The sizes straddle the tiles that lab 6's kernels use: 128 or 32 cells
 * along x (a row of 32 threads with 16-byte or 4-byte loads: widths that are
 * multiples of 4 and widths that are not), 14 and 30 rows along y (the
 * reference's tile and the textbook's), and z ranges shorter and longer than
 * the stretch of planes one block marches through (the coarsening factor).
 * Degenerate grids are 1 or 2 cells thin in some axis, so that every cell is
 * a copied boundary cell, or only a thin core is updated.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx      ny       nz  steps */
    { "degenerate",    1,      1,       1, 1 },
    { "degenerate",    1,     40,       1, 1 },
    { "degenerate",   40,      1,       1, 1 },
    { "degenerate",    1,      1,      40, 1 },
    { "degenerate",    2,      2,       2, 1 },
    { "degenerate",    3,      3,       3, 1 },
    { "degenerate",    8,      5,       2, 1 },   /* float4 path, every cell a boundary cell */
    { "degenerate",    4,      4,       4, 1 },   /* float4 path, a 2x2x2 core */
    { "tile-edges",  127,      9,       5, 1 },   /* widths around the 128-cell tile */
    { "tile-edges",  128,      8,       6, 1 },
    { "tile-edges",  129,      7,       4, 1 },
    { "tile-edges",  132,     17,       9, 1 },
    { "tile-edges",   33,     31,       7, 1 },   /* around the 32-cell tile of 4-byte loads */
    { "tile-edges",   64,     30,       5, 1 },
    { "tile-edges",   36,     33,       3, 1 },
    { "tile-edges",   31,     32,      30, 1 },
    { "z-march",      20,     12,       2, 1 },   /* nz below, at and above the planes per block */
    { "z-march",      20,     12,      15, 1 },
    { "z-march",      20,     12,      16, 1 },
    { "z-march",      20,     12,      17, 1 },
    { "z-march",      36,     20,      64, 1 },
    { "z-march",      65,      9,     333, 1 },
    { "z-march",       3,      3,    1000, 1 },
    { "rectangular", 1000,     3,       3, 1 },
    { "rectangular",   3,   1000,       3, 1 },
    { "rectangular", 300,    129,       9, 1 },
    { "rectangular", 1001,    30,      20, 1 },
    { "large",      2048,    640,       3, 1 },   /* more than one wave of blocks */
    { "large",       516,    260,      70, 1 },
    { "large",         4, 2000001,      3, 1 },   /* taller than 65535 blocks of 14 or 30 rows: gridDim.y */
    { "large",         3,      3, 2000001, 1 },   /* deeper than 65535 blocks of 30 planes: gridDim.z */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab06: register tiling", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
