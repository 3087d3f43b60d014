/*
 * check_01.c -- lab 1's correctness cases: stencil2d_sweep, Dirichlet boundary.
 *
 * Sizes straddle the usual block widths (32, 64, 128 along x; 4, 8, 16 along
 * y), include grids with no interior at all, and one grid larger than a full
 * wave of threads on any current GPU.  Every case runs on fresh random data.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx    ny  nz steps */
    { "degenerate",    1,    1, 1, 1 },   /* one cell: all boundary */
    { "degenerate",    1,   37, 1, 1 },   /* a column */
    { "degenerate",   37,    1, 1, 1 },   /* a row */
    { "degenerate",    2,    2, 1, 1 },
    { "degenerate",    3,    3, 1, 1 },   /* a single interior cell */
    { "block-edges",  31,    7, 1, 1 },   /* just below, at and above block multiples */
    { "block-edges",  32,    8, 1, 1 },
    { "block-edges",  33,    9, 1, 1 },
    { "block-edges",  63,   15, 1, 1 },
    { "block-edges",  64,   16, 1, 1 },
    { "block-edges", 129,   17, 1, 1 },
    { "rectangular", 1000,   3, 1, 1 },
    { "rectangular",   3, 1000, 1, 1 },
    { "rectangular", 257,  129, 1, 1 },
    { "large",      2049, 1031, 1, 1 },   /* 2.1 M cells: more than one wave of blocks */
    { "large",         4, 600001, 1, 1 },  /* taller than 65535 blocks of 8 rows: gridDim.y limit */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab01: naive 5-point sweep", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
