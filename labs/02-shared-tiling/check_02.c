/*
 * check_02.c -- lab 2's correctness cases: stencil2d_sweep with a tile in
 * shared memory, Dirichlet boundary.
 *
 * Sizes straddle tile widths (16, 32, 64 along x; 8, 16, 32 along y) so that
 * partial tiles at the right and bottom edges, and tiles whose halo falls
 * outside the grid, are all exercised.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx    ny  nz steps */
    { "degenerate",    1,    1, 1, 1 },
    { "degenerate",    1,   40, 1, 1 },
    { "degenerate",   40,    1, 1, 1 },
    { "degenerate",    2,    3, 1, 1 },
    { "degenerate",    3,    3, 1, 1 },
    { "tile-edges",   15,   15, 1, 1 },   /* smaller than one tile */
    { "tile-edges",   16,   16, 1, 1 },
    { "tile-edges",   17,   17, 1, 1 },
    { "tile-edges",   31,   33, 1, 1 },
    { "tile-edges",   32,   32, 1, 1 },
    { "tile-edges",   33,   31, 1, 1 },
    { "tile-edges",   65,   63, 1, 1 },
    { "rectangular", 1000,   4, 1, 1 },
    { "rectangular",   4, 1000, 1, 1 },
    { "rectangular", 300,  129, 1, 1 },
    { "large",      2050, 1030, 1, 1 },   /* more than one wave of blocks */
    { "large",         4, 2200001, 1, 1 }, /* taller than 65535 tiles of 32 rows: gridDim.y limit */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab02: shared-memory tiling", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
