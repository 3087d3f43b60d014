"""The 2D labs' diagrams (labs 1 to 4), each drawn from the lab's own source: a function of the kit's
root returning a Sketch whose alt text is written from the same constants as the picture."""

from __future__ import annotations

from math import nan
from pathlib import Path

from ...grading.build import impl_source
from . import constants
from .sketch import (BLUE, GREEN, GREY, INK, LINE, MUTED, ORANGE, PALE, ROW_COLOURS, SKY, VERMILION, WHITE,
                     Sketch, tint)

WARP = 32                   # threads per warp: CUDA's, the same on every GPU the kit supports
SECTOR_FLOATS = 8           # a 32-byte sector holds 8 floats


def _warp_grid(s: Sketch, x0, y0, cols, rows, cell, warp_of) -> None:
    """cols x rows cells, each coloured by its warp (warp 0 full, the others pale)."""
    for i in range(cols):
        for j in range(rows):
            w = warp_of(i, j)
            colour = ROW_COLOURS[w % len(ROW_COLOURS)]
            s.box(x0 + i * cell, y0 + j * cell, cell, cell, colour if w == 0 else tint(colour, 0.62), WHITE, 0.6)
    s.box(x0, y0, cols * cell, rows * cell, edge=INK, lw=1.4)


def _sectors(s: Sketch, x, y, sectors, read, slot, caption=True) -> None:
    """32-byte sectors side by side (or stacked when caption is False), a float slot coloured when read."""
    for i, sector in enumerate(sectors):
        sx, sy = (x + i * (SECTOR_FLOATS * slot + 6), y) if caption else (x, y + i * 9)
        for k in range(SECTOR_FLOATS):
            used = sector * 32 + 4 * k in read
            s.box(sx + k * slot, sy, slot, 14 if caption else 7, SKY if used else PALE, WHITE, 0.5)
        if caption:
            s.box(sx, sy, SECTOR_FLOATS * slot, 14, edge=INK)
            s.text(sx + SECTOR_FLOATS * slot / 2, y + 28, f"sector {i}", 11, MUTED, ha="center")


def thread_mapping(kit: Path) -> Sketch:
    """Lab 1: one warp of the starter's block (its `dim3 block(BX, BY)`), as the lanes map to cells
    and bytes, with threadIdx.x along x (coalesced) and along y (swapped)."""
    bx, by = constants.block_shape(impl_source("01-naive-5pt", "starter", kit))
    nx = 4096                                       # any wide row: addresses of row y start at y*nx*4
    lanes = [(t % bx, t // bx) for t in range(WARP)]
    centre = [(ty * nx + tx) * 4 for tx, ty in lanes]
    west = [a - 4 for a in centre]
    turned = [(tx * nx + ty) * 4 for tx, ty in lanes]
    along_x, shifted, along_y = (sorted({a // 32 for a in addrs}) for addrs in (centre, west, turned))
    alt = (f"One warp of a {bx} x {by} block. With threadIdx.x along x its {WARP} lanes read "
           f"{WARP * 4} contiguous bytes, {len(along_x)} sectors of 32 bytes, every byte used (the x-1 "
           f"loads: {len(shifted)} sectors). With threadIdx.x along y they read one float in each of "
           f"{len(along_y)} sectors, 4 of every 32 bytes used.")
    s = Sketch(880, 440, alt, "threadIdx.x walks x: coalesced")
    s.text(470, 26, "threadIdx.x walks y: the swapped mapping", 15, weight="bold")
    s.text(24, 45, f"block {bx} x {by}: one colour per warp; warp 0 is row 0", 12, MUTED)
    s.text(470, 45, f"the same block turned: warp 0 is a column of {WARP} rows", 12, MUTED)
    # Panel A: threadIdx.x along x.
    cell, ax, ay = 12, 24, 80
    _warp_grid(s, ax, ay, bx, by, cell, lambda i, j: (j * bx + i) // WARP)
    s.text(ax, ay - 6, "lane 0", 11, MUTED)
    s.text(ax + min(bx, WARP) * cell, ay - 6, f"lane {WARP - 1}", 11, MUTED, ha="right")
    s.arrow(ax, ay + by * cell + 14, ax + 70, ay + by * cell + 14)
    s.text(ax + 76, ay + by * cell + 18, "x: cell (x, y) is element y*nx + x", 12, MUTED)
    sy = ay + by * cell + 58
    s.text(ax, sy - 8, f"warp 0 reads {WARP} floats = {WARP * 4} B in {len(along_x)} sectors of 32 B:")
    _sectors(s, ax, sy, along_x, set(centre), 10)
    s.text(ax, sy + 50, f"its x-1 loads start 4 B earlier: {len(shifted)} sectors")
    _sectors(s, ax, sy + 58, shifted, set(west), 10)
    s.legend(ax, sy + 102, [(SKY, None, "a float a lane reads"), (PALE, None, "fetched, unused")])
    # Panel B: threadIdx.x along y.
    small, bx0, by0 = 9, 470, 80
    _warp_grid(s, bx0, by0, by, bx, small, lambda i, j: (i * bx + j) // WARP)
    s.text(bx0, by0 - 6, "lane 0", 11, MUTED)
    s.text(bx0, by0 + bx * small + 14, f"lane {WARP - 1}", 11, MUTED)
    gx = bx0 + by * small + 34
    _sectors(s, gx, by0 + 1, along_y[:bx], set(turned), 6, caption=False)
    s.arrow(bx0 + by * small + 4, by0 + small / 2, gx - 4, by0 + small / 2)
    tx0 = gx + SECTOR_FLOATS * 6 + 14
    s.text(tx0, by0 + 14, f"{len(along_y)} sectors of 32 B", 13, weight="bold")
    s.text(tx0, by0 + 32, f"for {WARP} floats: 4 of every\n32 bytes used, 28 wasted", linespacing=1.3)
    s.text(tx0, by0 + 66, "unless a cache keeps them\nuntil another warp reads them", 12, MUTED, linespacing=1.3)
    s.text(24, 428, "A warp issues its 32 loads together; the memory system serves them in 32-byte sectors "
                    "(four to a 128-byte line).", 12, MUTED)
    return s


def tile_halo(kit: Path) -> Sketch:
    """Lab 2: the starter's tile (ORDER, OUT_TILE_X, BLOCK_Y, ROWS_PER_THREAD), each input-tile cell
    coloured by the thread row that loads it, as the reference loads it."""
    order, wx, by, rows = constants.need(impl_source("02-shared-tiling", "starter", kit),
                                         "ORDER", "OUT_TILE_X", "BLOCK_Y", "ROWS_PER_THREAD")
    wy = by * rows
    in_x, in_y = wx + 2 * order, wy + 2 * order
    me_tx, me_ty = min(5, wx - 1), min(1, by - 1)              # the thread whose cells are outlined
    alt = (f"The {in_x} x {in_y} input tile of a {wx} x {wy} output tile (IN_TILE = OUT_TILE + {2 * order}), "
           f"each cell coloured by the thread row that loads it: thread row ty loads rows ty, ty+{by}, ... "
           f"({rows} rows, {by} apart); thread row 0 also loads the halo row above and the two halo columns, "
           f"thread row {by - 1} the halo row below; the four corners are never read and not loaded.")
    cell, ox, oy = 10, 62, 62
    last = ROW_COLOURS[(by - 1) % len(ROW_COLOURS)]
    s = Sketch(880, oy + in_y * cell + 200, alt,
               f"Lab 2's tile: who loads which cell ({wx} x {by} threads, {rows} rows each)")
    s.text(24, 45, f"tile[r][s] holds cell (x0 - {order} + s, y0 - {order} + r); the dashed box is the "
                   f"{wx} x {wy} output tile", 12, MUTED)
    for r in range(in_y):                                  # row bands; the halo columns: thread row 0's
        fill = (ROW_COLOURS[0] if r < order else last if r >= in_y - order
                else tint(ROW_COLOURS[(r - order) % by % len(ROW_COLOURS)], 0.55))
        s.box(ox + order * cell, oy + r * cell, wx * cell, cell, fill)
    for x in (ox, ox + (in_x - order) * cell):
        s.box(x, oy + order * cell, order * cell, wy * cell, ROW_COLOURS[0])
    s.grid(ox, oy, in_x, in_y, cell, cell)
    for r in (*range(order), *range(in_y - order, in_y)):  # the corners: never read
        for c in (*range(order), *range(in_x - order, in_x)):
            x, y = ox + c * cell, oy + r * cell
            s.box(x, y, cell, cell, WHITE, LINE, 0.5)
            a, b = x + 1.5, x + cell - 1.5
            s.line([a, b, nan, a, b], [y + 1.5, y + cell - 1.5, nan, y + cell - 1.5, y + 1.5], GREY, 0.8)
    s.box(ox, oy, in_x * cell, in_y * cell, edge=INK, lw=1.4)
    s.box(ox + order * cell, oy + order * cell, wx * cell, wy * cell, edge=INK, lw=1.2, dash=True)
    for k in range(rows):                                  # one thread's cells, one cell's neighbours
        s.box(ox + (order + me_tx) * cell + 1, oy + (order + me_ty + k * by) * cell + 1, cell - 2, cell - 2,
              edge=INK, lw=1.6)
    cx, cy = ox + (order + me_tx + 0.5) * cell, oy + (order + me_ty + by + 0.5) * cell
    s.ax.plot([cx - cell, cx + cell, cx, cx], [cy, cy, cy - cell, cy + cell], "o", color=INK, markersize=3)
    right, bottom = ox + in_x * cell, oy + in_y * cell
    s.line([ox, right], [bottom + 8] * 2, MUTED)
    s.text((ox + right) / 2, bottom + 22, f"IN_TILE_X = {in_x} columns", 11, MUTED, ha="center")
    s.line([ox - 8] * 2, [oy, bottom], MUTED)
    s.text(ox - 12, oy + 10, f"{in_y}\nrows", 11, MUTED, ha="right")
    ly = bottom + 40
    s.legend(24, ly, [(tint(ROW_COLOURS[ty % len(ROW_COLOURS)], 0.55), None,
                       f"thread row ty = {ty}: output rows {ty}, {ty + by}, {ty + 2 * by}, ... ({rows} per thread)")
                      for ty in range(by)])
    s.legend(470, ly, [(ROW_COLOURS[0], None, "thread row 0: the halo row above, and the halo"),
                       (WHITE, WHITE, f"   columns (threads 0-{wy - 1} left, {wy}-{2 * wy - 1} right)"),
                       (last, None, f"thread row {by - 1}: the halo row below"),
                       (WHITE, None, "corners: never read, not loaded")])
    ny = ly + 80
    s.box(24, ny, 12, 12, edge=INK, lw=1.6)
    s.text(42, ny + 10, f"the {rows} cells of thread (tx = {me_tx}, ty = {me_ty}), all loaded before the barrier; "
                        "the dots: the four neighbours\nthat one of its cells reads from the tile, stored there by "
                        "other threads", linespacing=1.3)
    s.text(24, ny + 50, "Every thread issues its loads first, stores them, waits at one __syncthreads(), then "
                        "computes its cells from the tile.", 12, MUTED)
    return s


def periodic_wrap(kit: Path) -> Sketch:
    """Lab 3: wrapped neighbours on a small periodic grid (a frame of ghost cells shows where each
    comes from), the reference's threads (VEC cells by ROWS rows) that take the edge copy, and the
    grids one and two cells wide."""
    vec, rows = constants.need(impl_source("03-boundary-neat", "reference", kit), "VEC", "ROWS")
    nx, ny = 8, 6
    alt = ("A periodic grid: a neighbour past one edge is the cell on the opposite edge, and a corner cell "
           f"wraps along both axes. The reference's threads each own {vec} cells of {rows} rows; only those "
           "that touch an edge take the copy of the kernel with the wrapping selects. On a grid one cell "
           "wide a cell is its own x neighbour; on a grid two cells wide both x neighbours are one cell.")
    s = Sketch(880, 450, alt, "Periodic: every neighbour exists, some wrap around")
    cell, gx, gy = 30, 40, 84
    s.text(24, 46, f"an {nx} x {ny} grid; the grey frame shows where a missing neighbour comes from", 12, MUTED)
    edge_fill, inner_fill = tint(ORANGE, 0.6), tint(SKY, 0.75)
    for y in range(-1, ny + 1):
        for x in range(-1, nx + 1):
            ghost_x, ghost_y = x in (-1, nx), y in (-1, ny)
            if ghost_x and ghost_y:
                continue                                   # the 5-point stencil needs no diagonal
            px, py = gx + (x + 1) * cell, gy + (y + 1) * cell
            ghost = ghost_x or ghost_y
            fill = "#f3f4f6" if ghost else edge_fill if x in (0, nx - 1) or y in (0, ny - 1) else inner_fill
            s.box(px, py, cell, cell, fill, LINE if ghost else WHITE, dash=ghost)
            s.text(px + cell / 2, py + cell / 2 + 4, f"{x % nx},{y % ny}", 9, MUTED if ghost else INK, ha="center")
    s.box(gx + cell, gy + cell, nx * cell, ny * cell, edge=INK, lw=1.6)
    s.box(gx + cell + 2, gy + cell + 2, cell - 4, cell - 4, edge=VERMILION, lw=2.4)
    ccx, ccy = gx + 1.5 * cell, gy + 1.5 * cell
    for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        s.arrow(ccx + dx * (cell / 2 - 3), ccy + dy * (cell / 2 - 3), ccx + dx * cell * 0.92, ccy + dy * cell * 0.92,
                VERMILION, 1.6)
    s.arrow(gx + (nx + 0.5) * cell, gy + cell + 4, gx + 0.5 * cell, gy + cell + 4, MUTED, bend=0.25)
    s.text(gx + (nx / 2 + 1) * cell, gy - 6, f"x = -1 is x = {nx - 1}", 11, MUTED, ha="center")
    bottom = gy + (ny + 2) * cell
    s.text(gx, bottom + 20, "red: the corner cell (0, 0) wraps along x and along y", 12, VERMILION)
    s.legend(gx, bottom + 32, [(edge_fill, None, f"the 2 nx + 2 ny - 4 = {2 * nx + 2 * ny - 4} edge cells"),
                               (inner_fill, None, "interior: x-1, x+1, y-1, y+1 are plain additions")])
    # The reference's threads on a wider grid.
    bx0, by0, tx_n, ty_n, small = 430, 84, 6, 4, 11
    s.text(bx0, 70, f"the reference: a thread owns {vec} x {rows} cells (one float4, {rows} rows)")
    s.box(bx0, by0, tx_n * vec * small, ty_n * rows * small, tint(ORANGE, 0.35))       # the edge threads' cells
    s.box(bx0 + vec * small, by0 + rows * small, (tx_n - 2) * vec * small, (ty_n - 2) * rows * small, tint(SKY, 0.5))
    s.grid(bx0, by0, tx_n * vec, ty_n * rows, small, small, lw=0.6)
    s.grid(bx0, by0, tx_n, ty_n, vec * small, rows * small, INK, 1.0)
    s.box(bx0, by0, tx_n * vec * small, ty_n * rows * small, edge=INK, lw=1.8)
    ly = by0 + ty_n * rows * small + 14
    s.legend(bx0, ly, [(tint(ORANGE, 0.35), None, "touches an edge: the edge copy, whose selects wrap"),
                       (tint(SKY, 0.5), None, "inside: the interior copy, with no wrapping code")])
    s.text(bx0, ly + 52, "one template, instantiated twice; on a large grid almost\nevery warp is inside, so the "
                         "branch does not diverge", 12, MUTED, linespacing=1.3)
    # Grids one and two cells wide.
    cy0, one_x = 310, bx0 + 30
    s.text(bx0, cy0 - 14, "grids one and two cells wide (the degenerate cases)")
    s.box(one_x, cy0, 40, 40, edge_fill, INK, 1.4)
    s.arrow(one_x + 40, cy0 + 12, one_x + 40, cy0 + 28, VERMILION, bend=-1.6)
    s.arrow(one_x, cy0 + 12, one_x, cy0 + 28, VERMILION, bend=1.6)
    s.text(one_x + 20, cy0 + 92, "nx = 1: x-1 = x+1 = x", ha="center")
    two_x = bx0 + 240
    for i in range(2):
        s.box(two_x + i * 40, cy0, 40, 40, edge_fill, INK, 1.4)
    s.arrow(two_x + 20, cy0, two_x + 60, cy0, VERMILION, bend=-0.6)
    s.arrow(two_x + 20, cy0 + 40, two_x + 60, cy0 + 40, VERMILION, bend=0.6)
    s.text(two_x + 40, cy0 + 92, "nx = 2: x-1 and x+1 are one cell", ha="center")
    s.text(24, 440, "(x + 1 == nx) ? 0 : x + 1 and (x == 0) ? nx - 1 : x - 1: right for every nx >= 1, "
                    "and no division.", 12, MUTED)
    return s


def bytes_in_flight(kit: Path) -> Sketch:
    """Lab 4: the starter's strip (THREADS threads of VEC cells, ROWS rows), the window of ROWS + 2
    rows each thread requests before computing, the reference's row buffer (PAD, ROW_BUF), lab 1's
    4 bytes in flight against it, and the sweeps alternating between two buffers."""
    threads, vec, strip, rows = constants.need(impl_source("04-max-smem", "starter", kit),
                                               "THREADS", "VEC", "STRIP", "ROWS")
    pad, row_buf = constants.need(impl_source("04-max-smem", "reference", kit), "PAD", "ROW_BUF")
    window = rows + 2
    in_flight = window * vec * 4
    alt = (f"Lab 4's strip: {threads} threads each own a float4 column of a {strip}-cell strip and compute "
           f"{rows} rows. Each thread requests the {window} rows of its window at once, {in_flight} bytes in "
           f"flight, against lab 1's 4; the x neighbours come from a row buffer of 2 x {row_buf} floats in "
           "shared memory, the y neighbours from registers; the sweeps alternate between two buffers on the "
           "GPU, and the host only swaps the pointers.")
    s = Sketch(880, 545, alt, f"Lab 4: a block's strip of {strip} cells, and the rows each thread requests at once")
    col, rh, ox, oy = 4.5, 20, 70, 70
    halo = tint(ORANGE, 0.2)
    for j in range(window):
        y = oy + j * rh
        s.text(ox - 8, y + 14, "ya-1" if j == 0 else f"ya+{j - 1}" if j > 1 else "ya", 11, MUTED, ha="right",
               family="monospace")
        s.box(ox, y, threads * col, rh - 3, tint(SKY, 0.75 if j in (0, window - 1) else 0.35))
        for t in range(1, threads, 2):                 # every other thread's column a darker blue
            s.box(ox + t * col, y, col, rh - 3, tint(BLUE, 0.75 if j in (0, window - 1) else 0.35))
        s.box(ox - col, y + 4, col - 1, rh - 11, halo)
        s.box(ox + threads * col + 1, y + 4, col - 1, rh - 11, halo)
    me, right = min(9, threads - 1), ox + threads * col
    s.box(ox + me * col - 1, oy - 2, col + 2, window * rh + 1, edge=VERMILION, lw=2)
    s.text(ox, oy + window * rh + 14, "thread 0", 11, MUTED)
    s.text(right, oy + window * rh + 14, f"thread {threads - 1}", 11, MUTED, ha="right")
    s.text(ox + me * col, oy - 8, f"thread {me}: {window} x float4 = {in_flight} B requested at once", 12, VERMILION)
    s.text(right + 16, oy + 14, f"{threads} threads x {vec} cells\n= {strip} columns\n\nrows ya .. ya+{rows - 1}:\n"
                                "computed", linespacing=1.3)
    s.text(right + 16, oy + 98, f"rows ya-1, ya+{rows}:\nthe neighbours' rows", 12, MUTED, linespacing=1.3)
    s.legend(right + 16, oy + 126, [(halo, None, "halo cells")])
    # Bytes in flight per thread: lab 1 against lab 4.
    ty0, t0, span = oy + window * rh + 48, 150, 430
    s.text(24, ty0, "bytes in flight per thread, over time (each bar: one load, from request to arrival)", 13,
           weight="bold")
    s.text(t0 - 10, ty0 + 26, "lab 1: 4 B", ha="right")
    s.box(t0, ty0 + 16, span * 0.55, 12, tint(SKY, 0.3))
    s.box(t0 + span * 0.55, ty0 + 16, 40, 12, GREEN)
    s.text(t0 + span * 0.55 + 46, ty0 + 26, "compute 1 cell, then the next load", 11, MUTED)
    s.text(t0 - 10, ty0 + 48 + window * 7, f"lab 4: {in_flight} B", ha="right")
    for j in range(window):
        s.box(t0 + j * 6, ty0 + 40 + j * 14, span * 0.55, 11, tint(BLUE, 0.35))
    done = t0 + (window - 1) * 6 + span * 0.55
    s.box(done, ty0 + 40, 60, window * 14 - 3, GREEN)
    s.text(done + 66, ty0 + 52, f"compute {rows} rows x {vec} cells\nfrom registers and the row buffer", 11, MUTED,
           linespacing=1.3)
    # The row buffer.
    by0 = ty0 + 40 + window * 14 + 30
    s.text(24, by0, f"the row buffer: __shared__ float rowbuf[2][{row_buf}]; rows alternate halves", 13, weight="bold")
    parts = ((pad - 1, tint(GREY, 0.6)), (1, halo), (strip, tint(SKY, 0.35)), (1, halo),
             (row_buf - pad - strip - 1, tint(GREY, 0.6)))
    for half in range(2):
        x, y = 60.0, by0 + 12 + half * 26
        s.text(52, y + 14, f"[{half}]", 11, MUTED, ha="right", family="monospace")
        for n, fill in parts:
            w = max(n * 560 / row_buf, 9)
            s.box(x, y, w, 18, fill, WHITE, 0.8)
            if n == strip:
                s.text(x + w / 2, y + 13, f"row ya+{half} (then ya+{half + 2}, ...): {strip} floats, float4 stores "
                                          "16-byte aligned", 11, ha="center")
            x += w
    s.text(700, by0 + 26, f"x-1 and x+{vec} of each\nthread come from here;\ny-1 and y+1 from its\nown registers", 11,
           MUTED, linespacing=1.2)
    # Sweeps kept on the GPU.
    sy = by0 + 100
    s.text(24, sy, "steps on the GPU: one launch per sweep on the stream, the host only swaps two pointers", 13,
           weight="bold")
    for i in range(4):
        x = 24 + i * 196
        s.box(x, sy + 10, 160, 24, tint(GREEN, 0.7))
        s.text(x + 80, sy + 27, f"sweep {i}: {'d_a to d_b' if i % 2 == 0 else 'd_b to d_a'}", ha="center")
        s.arrow(x + 162, sy + 22, x + 192, sy + 22)
    s.text(24 + 4 * 196, sy + 27, "...", 13)
    return s
