/*
 * check_03.c -- lab 3's correctness cases: stencil2d_periodic_sweep, every
 * cell updated, neighbours wrapping around.
 *
 * Widths both multiples of 4 and not (a float4 fast path must fall back),
 * grids of one and two cells per side (a cell is its own neighbour, or both
 * neighbours are the same cell), and sizes straddling common tile widths.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx    ny  nz steps */
    { "degenerate",    1,    1, 1, 1 },   /* its own neighbour four times */
    { "degenerate",    1,   37, 1, 1 },
    { "degenerate",   37,    1, 1, 1 },
    { "degenerate",    2,    2, 1, 1 },   /* x-1 and x+1 are the same cell */
    { "degenerate",    4,    3, 1, 1 },
    { "block-edges",  31,    7, 1, 1 },
    { "block-edges",  32,    8, 1, 1 },
    { "block-edges",  36,    9, 1, 1 },   /* multiple of 4, not of 32 */
    { "block-edges", 127,   33, 1, 1 },
    { "block-edges", 128,   32, 1, 1 },
    { "block-edges", 516,   17, 1, 1 },
    { "rectangular", 1000,   3, 1, 1 },
    { "rectangular",   3, 1000, 1, 1 },
    { "rectangular", 257,  130, 1, 1 },
    { "large",      2048, 1031, 1, 1 },
    { "large",      2051, 1025, 1, 1 },
    { "large",         4, 600001, 1, 1 },  /* taller than 65535 blocks of 8 rows: gridDim.y limit */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab03: periodic boundary without modulo", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
