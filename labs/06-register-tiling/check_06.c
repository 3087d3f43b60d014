/*
 * check_06.c -- lab 6's correctness cases: stencil3d_sweep, one 3D 7-point
 * sweep with a fixed (Dirichlet) boundary, computed with register tiling.  Lab 5
 * solves the same problem, so the two labs share one table of cases,
 * grader/include/stencil3d_cases.h, which says what each case straddles.
 */
#include "lab_driver.h"
#include "stencil3d_cases.h"

int main(int argc, char **argv)
{
    return lab_check_main("lab06: register tiling", STENCIL3D_CASES, STENCIL3D_NCASES, argc, argv);
}
