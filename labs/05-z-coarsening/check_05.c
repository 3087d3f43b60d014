/*
 * check_05.c -- lab 5's correctness cases: stencil3d_sweep, one 3D 7-point
 * sweep with a fixed (Dirichlet) boundary, computed by a block that marches
 * along z.  Lab 6 solves the same problem, so the two labs share one table of
 * cases, grader/include/stencil3d_cases.h, which says what each case straddles.
 */
#include "lab_driver.h"
#include "stencil3d_cases.h"

int main(int argc, char **argv)
{
    return lab_check_main("lab05: z-coarsening", STENCIL3D_CASES, STENCIL3D_NCASES, argc, argv);
}
