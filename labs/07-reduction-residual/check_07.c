/*
 * check_07.c -- lab 7's correctness cases: residual_norm2 and jacobi_sweep
 * (the jacobi_residual kind, grader/harness/kinds/jacobi_residual.c).
 *
 * "cells" cases check both launchers on random u and f: the sum against a
 * long-double CPU sum within a bound that grows with the number of terms, and
 * every cell of the Jacobi sweep.  "determinism" cases run the residual
 * `steps` times on the same inputs, then on buffers at other addresses: every
 * bit must agree.  "convergence" cases run the student's solver on the model
 * Poisson problem: the residual must fall by cos(pi h) per sweep over `steps`
 * sweeps, and on grids of n <= 63 converge to the analytic solution within
 * the O(h^2) discretisation error.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase           nx      ny  nz steps  mode */
    { "degenerate",     1,      1, 1, 1 },   /* no interior: the sum is 0, unew = u */
    { "degenerate",     2,      9, 1, 1 },
    { "degenerate",     3,      3, 1, 1 },   /* a single interior cell */
    { "degenerate",     1,    257, 1, 1 },
    { "degenerate",   257,      1, 1, 1 },
    { "block-edges",   31,      7, 1, 1 },
    { "block-edges",  256,     33, 1, 1 },
    { "block-edges",  257,     65, 1, 1 },
    { "block-edges", 1025,     17, 1, 1 },
    { "rectangular", 4099,      5, 1, 1 },
    { "rectangular",    5,   4099, 1, 1 },
    { "large",       2049,   1031, 1, 1 },   /* more than one wave of blocks, many partial sums */
    { "large",          4, 600001, 1, 1 },   /* taller than 65535 blocks of 8 rows: gridDim.y limit */
    { "determinism", 1000,   1000, 1, 10, LAB_MODE_DETERMINISM },
    { "determinism", 4097,   2049, 1, 10, LAB_MODE_DETERMINISM },
    { "determinism",   33,      5, 1, 10, LAB_MODE_DETERMINISM },  /* fewer cells than one block */
    { "convergence",   17,     17, 1, 20, LAB_MODE_CONVERGENCE },
    { "convergence",   33,     33, 1, 20, LAB_MODE_CONVERGENCE },
    { "convergence",  513,    513, 1, 20, LAB_MODE_CONVERGENCE },  /* the rate only */
};

int main(int argc, char **argv)
{
    return lab_check_main("lab07: residual reduction and Jacobi", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
