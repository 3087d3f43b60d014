/*
 * check_04.c -- lab 4's correctness cases: stencil2d_run, `steps` Dirichlet
 * sweeps kept on the GPU, returning the buffer that holds the result.
 *
 * Step counts 0 (the input itself, in d_a), odd and even; widths that are
 * multiples of 4 (a float4 path) and not (its fallback); widths straddling a
 * 512-cell strip and heights straddling a block's range of rows.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx    ny  nz steps */
    { "steps",        64,   64, 1, 0 },   /* nothing to do: d_a, untouched */
    { "steps",        64,   64, 1, 1 },
    { "steps",        64,   64, 1, 2 },
    { "steps",        64,   64, 1, 3 },
    { "steps",        67,   61, 1, 5 },
    { "degenerate",    1,    1, 1, 3 },
    { "degenerate",    1,   33, 1, 2 },
    { "degenerate",   33,    1, 1, 2 },
    { "degenerate",    4,    4, 1, 3 },
    { "degenerate",    3,    3, 1, 1 },
    { "block-edges", 511,   31, 1, 2 },
    { "block-edges", 512,   32, 1, 3 },
    { "block-edges", 516,   33, 1, 2 },   /* float4 path, partial strip */
    { "block-edges", 1026,  65, 1, 3 },   /* not a multiple of 4 */
    { "rectangular", 4096,   5, 1, 2 },
    { "rectangular",   8, 2000, 1, 2 },
    { "large",      2048, 1030, 1, 4 },
    { "large",         4, 600001, 1, 2 },  /* taller than 65535 blocks of 8 rows: gridDim.y limit */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab04: time steps on the GPU", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
