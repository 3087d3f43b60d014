/*
 * check_08.c -- lab 8's correctness cases: stencil2d_run, `steps` Dirichlet
 * sweeps that the kernel may fuse into passes of several sweeps each.
 *
 * Every cell is compared with the CPU reference of lab 4, cpu_stencil2d_run
 * (grader/harness/cpu_reference.c): `steps` separate sweeps.  lab.json's
 * tolerance is zero, so a fused kernel must give the same bits as the
 * separate sweeps, not merely close values.
 *
 * Where a fused kernel's seams are.  The reference (with its default
 * parameters) fuses up to K = 8 sweeps per pass; each warp owns a strip of
 * 128 columns that stores the 112 inside its halos of 8, a block holds two
 * such warps (224 stored columns), and a warp stores a segment of 128 rows,
 * computing 8 more above and below it.  Warps whose strip and rows lie
 * strictly inside the grid run a copy of the loop without the boundary
 * tests; widths that are not a multiple of 4 take 4-byte copies and the
 * boundary-testing loop everywhere.  The known-good overlapped tile uses
 * 128 x 64 tiles, the first reference used strips of 512 columns (496
 * stored) and segments of 256 rows, and students choose their own, so the
 * cases vary all of these:
 *   - step counts 0 and 1, odd and even, smaller than K, equal to it, larger,
 *     not a multiple of it, and several passes (16, 17, 24): passes of K
 *     sweeps and shorter ones;
 *   - widths that are multiples of 4 (float4 path) and not, around one and
 *     two strips of each design; heights around one and two segments;
 *   - tcase "warp-strips": the reference's seams, one column or row either
 *     side of 224 columns and 128 or 256 rows, a block with an idle warp
 *     (an odd number of strips), and the first grids where a warp runs the
 *     loop without boundary tests (236 x 265: strip 1 and segment 1, its
 *     last row in the pipeline is row ny-2) and where none does (236 x 264);
 *   - degenerate grids (1 x 1, single rows and columns, 2- and 3-wide grids,
 *     where every cell or most cells are boundary);
 *   - a grid taller than gridDim.y could cover with one row of blocks per
 *     8 rows (600001 rows);
 *   - lab 4's own table, row for row (tcase "as-lab04", its two large rows in
 *     "large"), so that any grid and step count that lab 4 checks is checked
 *     here with the same semantics.
 * The cases of one tcase stay together (check_runner.c makes one TCase of a
 * run of equal names); only tcase "large" is left out of `make sanitize`.
 */
#include "lab_driver.h"

static const lab_case CASES[] = {
    /* tcase          nx      ny  nz steps */
    { "steps",        64,     64, 1, 0 },   /* nothing to do: d_a, untouched */
    { "steps",        64,     64, 1, 1 },
    { "steps",        64,     64, 1, 2 },
    { "steps",        64,     64, 1, 3 },
    { "steps",        67,     61, 1, 5 },
    { "passes",     1000,    600, 1, 7 },   /* fewer sweeps than K: one short pass */
    { "passes",     1000,    600, 1, 8 },   /* exactly K */
    { "passes",     1000,    600, 1, 9 },   /* K + 1, odd */
    { "passes",     1000,    600, 1, 16 },  /* the bench's count: 2 passes of K */
    { "passes",     1002,    530, 1, 17 },  /* scalar path, not a multiple of K */
    { "passes",      999,    513, 1, 8 },
    { "passes",      500,    300, 1, 24 },
    { "degenerate",    1,      1, 1, 3 },
    { "degenerate",    1,     33, 1, 2 },
    { "degenerate",   33,      1, 1, 2 },
    { "degenerate",    4,      4, 1, 3 },
    { "degenerate",    3,      3, 1, 9 },
    { "degenerate",    2,     70, 1, 16 },
    { "degenerate",    5,      5, 1, 16 },
    { "block-edges", 496,    256, 1, 8 },   /* the first reference's strip and segment */
    { "block-edges", 500,    257, 1, 8 },   /* a second strip of 4 columns, a 1-row segment */
    { "block-edges", 992,    255, 1, 8 },
    { "block-edges", 497,    512, 1, 8 },   /* not a multiple of 4 */
    { "block-edges", 112,    100, 1, 8 },   /* one warp strip of the reference */
    { "block-edges", 113,    100, 1, 8 },   /* a second strip of 1 column, 4-byte copies */
    { "block-edges", 516,     33, 1, 4 },
    { "warp-strips", 224,    129, 1, 8 },   /* one block (two warp strips), a 1-row segment */
    { "warp-strips", 225,    127, 1, 9 },   /* a third strip of 1 column; 3 passes of 3 */
    { "warp-strips", 223,    257, 1, 16 },  /* the second strip a column short; a 1-row segment */
    { "warp-strips", 224,    257, 1, 9 },
    { "warp-strips", 236,    265, 1, 8 },   /* the first interior warp: rows 120..263 = ny-2 */
    { "warp-strips", 236,    264, 1, 16 },  /* one row less: every warp tests the boundary */
    { "warp-strips", 448,    384, 1, 16 },  /* interior warps beside boundary-testing ones */
    { "warp-strips", 452,    385, 1, 17 },  /* a block with an idle warp; passes of 6, 6, 5 */
    { "warp-strips", 336,    255, 1, 16 },  /* three strips: the second block's second warp idle */
    { "rectangular", 4096,     5, 1, 9 },
    { "rectangular",    8,  2000, 1, 16 },
    { "rectangular", 16384,    3, 1, 8 },
    { "large",      2048,   1030, 1, 16 },
    { "large",         4, 600001, 1, 9 },   /* taller than 65535 blocks of 8 rows: gridDim.y limit */
    { "large",      2048,   1030, 1, 4 },   /* lab 4's two large cases */
    { "large",         4, 600001, 1, 2 },
    /* lab 4's table (labs/04-max-smem/check_04.c), row for row; its two large
     * rows are in tcase "large" above, which `make sanitize` leaves out */
    { "as-lab04",     64,     64, 1, 0 },
    { "as-lab04",     64,     64, 1, 1 },
    { "as-lab04",     64,     64, 1, 2 },
    { "as-lab04",     64,     64, 1, 3 },
    { "as-lab04",     67,     61, 1, 5 },
    { "as-lab04",      1,      1, 1, 3 },
    { "as-lab04",      1,     33, 1, 2 },
    { "as-lab04",     33,      1, 1, 2 },
    { "as-lab04",      4,      4, 1, 3 },
    { "as-lab04",      3,      3, 1, 1 },
    { "as-lab04",    511,     31, 1, 2 },
    { "as-lab04",    512,     32, 1, 3 },
    { "as-lab04",    516,     33, 1, 2 },
    { "as-lab04",   1026,     65, 1, 3 },
    { "as-lab04",   4096,      5, 1, 2 },
    { "as-lab04",      8,   2000, 1, 2 },
};

int main(int argc, char **argv)
{
    return lab_check_main("lab08: temporal blocking", CASES,
                          (int)(sizeof CASES / sizeof CASES[0]), argc, argv);
}
