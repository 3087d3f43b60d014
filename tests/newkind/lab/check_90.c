/*
 * check_90.c -- the worked example's correctness cases (tests/newkind/): the 9-point box
 * sweep on grids that straddle a warp and a block, and the degenerate ones.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase         nx    ny  nz steps */
    { "degenerate",   1,    1, 1, 1 },
    { "degenerate",   2,    5, 1, 1 },
    { "degenerate",   3,    3, 1, 1 },
    { "edges",       31,   33, 1, 1 },
    { "edges",      257,   65, 1, 1 },
    { "large",     2050, 1030, 1, 1 },
};

int main(int argc, char **argv)
{
    return lab_check_main("lab90: 9-point box (worked example)", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
