"""The 2D labs' diagrams (labs 1 to 4), each drawn from the lab's own source.

    thread_mapping(kit)   lab 1: one warp's loads with threadIdx.x along x, and along y (coalescing)
    tile_halo(kit)        lab 2: the input tile, its halo, and the thread row that loads each cell
    periodic_wrap(kit)    lab 3: the wrapped neighbours, the corners, the reference's edge threads
    bytes_in_flight(kit)  lab 4: the strip, the register window requested at once, the row buffer,
                          and the sweeps alternating between two buffers on the GPU

Each returns a Canvas whose title is the picture's alt text.
"""

from __future__ import annotations

from pathlib import Path

from ...grading.build import impl_source
from . import constants
from .svg import (BLUE, GREEN, GREY, INK, LINE, MONO, MUTED, ORANGE, PURPLE, SKY, VERMILION, YELLOW, Canvas,
                  tint)

WARP = 32                   # threads per warp: CUDA's, the same on every GPU the kit supports
SECTOR_FLOATS = 8           # a 32-byte sector holds 8 floats
#: Colours of thread rows (or warps), in order.
ROW_COLOURS = (SKY, ORANGE, GREEN, PURPLE, YELLOW, BLUE, VERMILION, GREY)


# ---------------------------------------------------------------- lab 1

def _sectors(addresses: list[int]) -> list[int]:
    """The 32-byte sectors a warp's 4-byte loads at these byte addresses touch, in order."""
    return sorted({a // 32 for a in addresses})


def thread_mapping(kit: Path) -> Canvas:
    """Lab 1: one warp of the starter's block (its `dim3 block(BX, BY)`), as the lanes map to cells
    and bytes, with threadIdx.x along x (coalesced) and along y (swapped)."""
    bx, by = constants.block_shape(impl_source("01-naive-5pt", "starter", kit))
    nx = 4096                                       # any wide row: addresses of row y start at y*nx*4
    lanes = [(t % bx, t // bx) for t in range(WARP)]                 # (tx, ty) of warp 0's lanes
    centre = [(ty * nx + tx) * 4 for tx, ty in lanes]
    west = [a - 4 for a in centre]                                   # the x-1 loads
    turned = [(tx * nx + ty) * 4 for tx, ty in lanes]
    along_x, shifted, along_y = _sectors(centre), _sectors(west), _sectors(turned)
    alt = (f"One warp of a {bx} x {by} block. With threadIdx.x along x its {WARP} lanes read "
           f"{WARP * 4} contiguous bytes, {len(along_x)} sectors of 32 bytes, every byte used (the x-1 "
           f"loads: {len(shifted)} sectors). With threadIdx.x along y they read one float in each of "
           f"{len(along_y)} sectors, 4 of every 32 bytes used.")
    c = Canvas(880, 440, alt)
    cell = 12
    # Panel A: threadIdx.x along x.
    ax, ay = 24, 80
    c.text(ax, 26, "threadIdx.x walks x: coalesced", size=15, weight="bold")
    c.text(ax, 45, f"block {bx} x {by}: one colour per warp; warp 0 is row 0", size=12, fill=MUTED)
    c.text(ax, ay - 6, "lane 0", size=11, fill=MUTED)
    c.text(ax + min(bx, WARP) * cell, ay - 6, f"lane {WARP - 1}", size=11, anchor="end", fill=MUTED)
    for ty in range(by):
        for tx in range(bx):
            warp = (ty * bx + tx) // WARP
            colour = ROW_COLOURS[warp % len(ROW_COLOURS)]
            c.rect(ax + tx * cell, ay + ty * cell, cell, cell, fill=colour if warp == 0 else tint(colour, 0.62),
                   stroke="#ffffff", sw=0.8)
    c.rect(ax, ay, bx * cell, by * cell, stroke=INK, sw=1.4)
    c.arrow(ax, ay + by * cell + 14, ax + 70, ay + by * cell + 14, sw=1.2, head=6)
    c.text(ax + 76, ay + by * cell + 18, "x: cell (x, y) is element y*nx + x", size=12, fill=MUTED)
    slot = 10
    sy = ay + by * cell + 58
    c.text(ax, sy - 8, f"warp 0 reads {WARP} floats = {WARP * 4} B in {len(along_x)} sectors of 32 B:", size=12)
    _sector_strip(c, ax, sy, along_x, set(centre), slot)
    sy2 = sy + 58
    c.text(ax, sy2 - 8, f"its x-1 loads start 4 B earlier: {len(shifted)} sectors", size=12)
    _sector_strip(c, ax, sy2, shifted, set(west), slot)
    c.legend(ax, sy2 + 44, [(SKY, None, "a float a lane reads"), ("#eef1f4", None, "fetched, unused")], size=12)
    # Panel B: threadIdx.x along y.
    bx0, by0 = 470, 80
    c.text(bx0, 26, "threadIdx.x walks y: the swapped mapping", size=15, weight="bold")
    c.text(bx0, 45, f"the same block turned: warp 0 is a column of {WARP} rows", size=12, fill=MUTED)
    cols, rows, small = by, bx, 9
    for x in range(cols):
        for y in range(rows):
            warp = (x * bx + y) // WARP
            colour = ROW_COLOURS[warp % len(ROW_COLOURS)]
            c.rect(bx0 + x * small, by0 + y * small, small, small,
                   fill=colour if warp == 0 else tint(colour, 0.62), stroke="#ffffff", sw=0.6)
    c.rect(bx0, by0, cols * small, rows * small, stroke=INK, sw=1.4)
    c.text(bx0, by0 - 6, "lane 0", size=11, fill=MUTED)
    c.text(bx0, by0 + rows * small + 14, f"lane {WARP - 1}", size=11, fill=MUTED)
    gx = bx0 + cols * small + 34
    slot_b = 6
    wanted = set(turned)
    for i, s_ in enumerate(along_y[:rows]):
        for k in range(SECTOR_FLOATS):
            used = s_ * 32 + 4 * k in wanted
            c.rect(gx + k * slot_b, by0 + i * small + 1, slot_b, small - 2, fill=SKY if used else "#eef1f4",
                   stroke="#ffffff", sw=0.5)
        c.rect(gx, by0 + i * small + 1, SECTOR_FLOATS * slot_b, small - 2, stroke=LINE, sw=0.6)
    c.arrow(bx0 + cols * small + 4, by0 + small / 2, gx - 4, by0 + small / 2, sw=1, head=5)
    tx0 = gx + SECTOR_FLOATS * slot_b + 14
    c.text(tx0, by0 + 14, f"{len(along_y)} sectors of 32 B", size=13, weight="bold")
    c.text(tx0, by0 + 32, f"for {WARP} floats: 4 of every", size=12)
    c.text(tx0, by0 + 48, "32 bytes used, 28 wasted", size=12)
    c.text(tx0, by0 + 66, "unless a cache keeps them", size=12, fill=MUTED)
    c.text(tx0, by0 + 82, "until another warp reads them", size=12, fill=MUTED)
    c.text(24, 428, "A warp issues its 32 loads together; the memory system serves them in 32-byte sectors "
                    "(four to a 128-byte line).", size=12, fill=MUTED)
    return c


def _sector_strip(c: Canvas, x: float, y: float, sectors: list[int], read: set[int], slot: float) -> None:
    """Sectors side by side, 8 float slots each, a slot coloured when its byte address is in read."""
    for i, s in enumerate(sectors):
        sx = x + i * (SECTOR_FLOATS * slot + 6)
        for k in range(SECTOR_FLOATS):
            c.rect(sx + k * slot, y, slot, 14, fill=SKY if s * 32 + 4 * k in read else "#eef1f4",
                   stroke="#ffffff", sw=0.6)
        c.rect(sx, y, SECTOR_FLOATS * slot, 14, stroke=INK, sw=1)
        c.text(sx + SECTOR_FLOATS * slot / 2, y + 28, f"sector {i}", size=11, anchor="middle", fill=MUTED)


# ---------------------------------------------------------------- lab 2

def tile_halo(kit: Path) -> Canvas:
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
    cell = 10
    ox, oy = 62, 62
    c = Canvas.titled(oy + in_y * cell + 200, alt, f"Lab 2's tile: who loads which cell ({wx} x {by} threads, {rows} rows each)")
    c.text(24, 45, f"tile[r][s] holds cell (x0 - {order} + s, y0 - {order} + r); the dashed box is the "
                   f"{wx} x {wy} output tile", size=12, fill=MUTED)
    for r in range(in_y):
        for s in range(in_x):
            halo_r, halo_s = r < order or r >= in_y - order, s < order or s >= in_x - order
            x, y = ox + s * cell, oy + r * cell
            if halo_r and halo_s:
                c.rect(x, y, cell, cell, fill="#ffffff", stroke=LINE, sw=0.5)
                c.line(x + 1.5, y + 1.5, x + cell - 1.5, y + cell - 1.5, stroke=GREY, sw=0.8)
                c.line(x + 1.5, y + cell - 1.5, x + cell - 1.5, y + 1.5, stroke=GREY, sw=0.8)
                continue
            if halo_r:                                     # above: thread row 0; below: the last one
                colour = ROW_COLOURS[0] if r < order else ROW_COLOURS[(by - 1) % len(ROW_COLOURS)]
                c.rect(x, y, cell, cell, fill=colour, stroke="#ffffff", sw=0.5)
            elif halo_s:
                c.rect(x, y, cell, cell, fill=ROW_COLOURS[0], stroke="#ffffff", sw=0.5)
            else:
                ty = (r - order) % by
                c.rect(x, y, cell, cell, fill=tint(ROW_COLOURS[ty % len(ROW_COLOURS)], 0.55), stroke="#ffffff",
                       sw=0.5)
    c.rect(ox, oy, in_x * cell, in_y * cell, stroke=INK, sw=1.4)
    c.rect(ox + order * cell, oy + order * cell, wx * cell, wy * cell, stroke=INK, sw=1.2, dash="5,3")
    # one thread's cells, and the stencil of one of them
    for k in range(rows):
        r, s_ = order + me_ty + k * by, order + me_tx
        c.rect(ox + s_ * cell + 1, oy + r * cell + 1, cell - 2, cell - 2, stroke=INK, sw=1.6)
    r0, s0 = order + me_ty + by, order + me_tx
    cx, cy = ox + (s0 + 0.5) * cell, oy + (r0 + 0.5) * cell
    for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        c.circle(cx + dx * cell, cy + dy * cell, 2.2, fill=INK)
    # dimensions
    right, bottom = ox + in_x * cell, oy + in_y * cell
    c.line(ox, bottom + 8, right, bottom + 8, stroke=MUTED, sw=1)
    c.text((ox + right) / 2, bottom + 22, f"IN_TILE_X = {in_x} columns", size=11, anchor="middle", fill=MUTED)
    c.line(ox - 8, oy, ox - 8, bottom, stroke=MUTED, sw=1)
    c.text(ox - 12, oy + 10, f"{in_y}", size=11, anchor="end", fill=MUTED)
    c.text(ox - 12, oy + 24, "rows", size=11, anchor="end", fill=MUTED)
    # the legend, below
    ly = bottom + 40
    body = [(tint(ROW_COLOURS[ty % len(ROW_COLOURS)], 0.55), None,
             f"thread row ty = {ty}: output rows {ty}, {ty + by}, {ty + 2 * by}, ... ({rows} per thread)")
            for ty in range(by)]
    c.legend(24, ly, body, size=12)
    c.legend(470, ly, [
        (ROW_COLOURS[0], None, "thread row 0: the halo row above, and the halo"),
        ("#ffffff", "#ffffff", f"   columns (threads 0-{wy - 1} left, {wy}-{2 * wy - 1} right)"),
        (ROW_COLOURS[(by - 1) % len(ROW_COLOURS)], None, f"thread row {by - 1}: the halo row below"),
        ("#ffffff", None, "corners: never read, not loaded"),
    ], size=12)
    ny_ = ly + 4 * 18 + 8
    c.rect(24, ny_, 12, 12, stroke=INK, sw=1.6)
    c.text(42, ny_ + 10, f"the {rows} cells of thread (tx = {me_tx}, ty = {me_ty}), all loaded before the "
                         "barrier; the dots: the four neighbours", size=12)
    c.text(42, ny_ + 26, "that one of its cells reads from the tile, stored there by other threads", size=12)
    c.text(24, ny_ + 50, "Every thread issues its loads first, stores them, waits at one __syncthreads(), then "
                         "computes its cells from the tile.", size=12, fill=MUTED)
    return c


def periodic_wrap(kit: Path) -> Canvas:
    """Lab 3: wrapped neighbours on a small periodic grid (a frame of ghost cells shows where each
    comes from), the reference's threads (VEC cells by ROWS rows) that take the edge copy, and the
    grids one and two cells wide."""
    vec, rows = constants.need(impl_source("03-boundary-neat", "reference", kit), "VEC", "ROWS")
    nx, ny = 8, 6
    alt = ("A periodic grid: a neighbour past one edge is the cell on the opposite edge, and a corner cell "
           f"wraps along both axes. The reference's threads each own {vec} cells of {rows} rows; only those "
           "that touch an edge take the copy of the kernel with the wrapping selects. On a grid one cell "
           "wide a cell is its own x neighbour; on a grid two cells wide both x neighbours are one cell.")
    c = Canvas.titled(450, alt, "Periodic: every neighbour exists, some wrap around")
    # Panel A: an 8 x 6 grid and its frame of ghost cells, each naming the cell it wraps to.
    cell, gx, gy = 30, 40, 84
    c.text(24, 46, f"an {nx} x {ny} grid; the grey frame shows where a missing neighbour comes from", size=12,
           fill=MUTED)
    for y in range(-1, ny + 1):
        for x in range(-1, nx + 1):
            px, py = gx + (x + 1) * cell, gy + (y + 1) * cell
            ghost = x in (-1, nx) or y in (-1, ny)
            if ghost and (x in (-1, nx)) and (y in (-1, ny)):
                continue                                   # the 5-point stencil needs no diagonal
            edge = x in (0, nx - 1) or y in (0, ny - 1)
            fill = "#f3f4f6" if ghost else tint(ORANGE, 0.6) if edge else tint(SKY, 0.75)
            c.rect(px, py, cell, cell, fill=fill, stroke="#ffffff" if not ghost else LINE, sw=1,
                   dash="3,2" if ghost else None)
            wx, wy = x % nx, y % ny
            c.text(px + cell / 2, py + cell / 2 + 4, f"{wx},{wy}", size=9, anchor="middle",
                   fill=MUTED if ghost else INK)
    c.rect(gx + cell, gy + cell, nx * cell, ny * cell, stroke=INK, sw=1.6)
    # the corner cell (0, 0) and its four neighbours
    ccx, ccy = gx + 1.5 * cell, gy + 1.5 * cell
    c.rect(gx + cell + 2, gy + cell + 2, cell - 4, cell - 4, stroke=VERMILION, sw=2.4)
    for (dx, dy) in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        c.arrow(ccx + dx * (cell / 2 - 3), ccy + dy * (cell / 2 - 3), ccx + dx * cell * 0.92,
                ccy + dy * cell * 0.92, stroke=VERMILION, sw=1.6, head=6)
    # where a ghost comes from: the cell left of (0, 0) is (nx-1, 0), at the other end of row 0
    c.curved_arrow(gx + (nx + 0.5) * cell, gy + cell + 4, gx + (nx / 2 + 1) * cell, gy - 30,
                   gx + 0.5 * cell, gy + cell + 4, stroke=MUTED, sw=1.2)
    c.text(gx + (nx / 2 + 1) * cell, gy - 6, f"x = -1 is x = {nx - 1}", size=11, anchor="middle", fill=MUTED)
    bottom = gy + (ny + 2) * cell
    c.text(gx, bottom + 20, "red: the corner cell (0, 0) wraps along x and along y", size=12, fill=VERMILION)
    c.legend(gx, bottom + 32, [(tint(ORANGE, 0.6), None, f"the 2 nx + 2 ny - 4 = {2 * nx + 2 * ny - 4} edge cells"),
                               (tint(SKY, 0.75), None, "interior: x-1, x+1, y-1, y+1 are plain additions")],
             size=12)
    # Panel B: the reference's threads on a wider grid.
    bx0, by0 = 430, 84
    tx_n, ty_n, small = 6, 4, 11
    c.text(bx0, 70, f"the reference: a thread owns {vec} x {rows} cells (one float4, {rows} rows)", size=12)
    for ty in range(ty_n):
        for tx in range(tx_n):
            edge = tx in (0, tx_n - 1) or ty in (0, ty_n - 1)
            fill = tint(ORANGE, 0.35) if edge else tint(SKY, 0.5)
            px, py = bx0 + tx * vec * small, by0 + ty * rows * small
            for j in range(rows):
                for i in range(vec):
                    c.rect(px + i * small, py + j * small, small, small, fill=fill, stroke="#ffffff", sw=0.6)
            c.rect(px, py, vec * small, rows * small, stroke=INK, sw=1)
    c.rect(bx0, by0, tx_n * vec * small, ty_n * rows * small, stroke=INK, sw=1.8)
    ly = by0 + ty_n * rows * small + 14
    c.legend(bx0, ly, [(tint(ORANGE, 0.35), None, "touches an edge: the edge copy, whose selects wrap"),
                       (tint(SKY, 0.5), None, "inside: the interior copy, with no wrapping code")], size=12)
    c.text(bx0, ly + 52, "one template, instantiated twice; on a large grid almost", size=12, fill=MUTED)
    c.text(bx0, ly + 68, "every warp is inside, so the branch does not diverge", size=12, fill=MUTED)
    # Panel C: grids one and two cells wide.
    cy0 = 300
    c.text(bx0, cy0 - 14, "grids one and two cells wide (the degenerate cases)", size=12)
    one_x, one_y = bx0 + 30, cy0 + 10
    c.rect(one_x, one_y, 40, 40, fill=tint(ORANGE, 0.6), stroke=INK, sw=1.4)
    c.curved_arrow(one_x + 40, one_y + 14, one_x + 80, one_y + 20, one_x + 40, one_y + 28, stroke=VERMILION)
    c.curved_arrow(one_x, one_y + 14, one_x - 40, one_y + 20, one_x, one_y + 28, stroke=VERMILION)
    c.text(one_x + 20, one_y + 92, "nx = 1: x-1 = x+1 = x", size=12, anchor="middle")
    two_x = bx0 + 240
    for i in range(2):
        c.rect(two_x + i * 40, one_y, 40, 40, fill=tint(ORANGE, 0.6), stroke=INK, sw=1.4)
    c.curved_arrow(two_x + 20, one_y, two_x + 40, one_y - 26, two_x + 60, one_y, stroke=VERMILION)
    c.curved_arrow(two_x + 20, one_y + 40, two_x + 40, one_y + 66, two_x + 60, one_y + 40, stroke=VERMILION)
    c.text(two_x + 40, one_y + 92, "nx = 2: x-1 and x+1 are one cell", size=12, anchor="middle")
    c.text(24, 440, "(x + 1 == nx) ? 0 : x + 1 and (x == 0) ? nx - 1 : x - 1: right for every nx >= 1, "
                    "and no division.", size=12, fill=MUTED)
    return c


def bytes_in_flight(kit: Path) -> Canvas:
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
    c = Canvas.titled(545, alt, f"Lab 4: a block's strip of {strip} cells, and the rows each thread requests at once")
    # The strip: one column per thread, the window's rows.
    col, rh, ox, oy = 4.5, 20, 70, 70
    for j in range(window):
        y = oy + j * rh
        halo = j in (0, window - 1)
        label = "ya-1" if j == 0 else f"ya+{j - 1}" if j > 1 else "ya"
        c.text(ox - 8, y + 14, label, size=11, anchor="end", fill=MUTED, family=MONO)
        for t in range(threads):
            base = SKY if t % 2 == 0 else BLUE
            c.rect(ox + t * col, y, col, rh - 3, fill=tint(base, 0.75 if halo else 0.35), stroke=None)
        c.rect(ox - col, y + 4, col - 1, rh - 11, fill=tint(ORANGE, 0.2))                 # halo cells
        c.rect(ox + threads * col + 1, y + 4, col - 1, rh - 11, fill=tint(ORANGE, 0.2))
    me = min(9, threads - 1)
    c.rect(ox + me * col - 1, oy - 2, col + 2, window * rh + 1, stroke=VERMILION, sw=2)
    right = ox + threads * col
    c.text(ox, oy + window * rh + 14, "thread 0", size=11, fill=MUTED)
    c.text(right, oy + window * rh + 14, f"thread {threads - 1}", size=11, anchor="end", fill=MUTED)
    c.text(ox + me * col + col / 2, oy - 8, f"thread {me}: {window} x float4 = {in_flight} B requested at once",
           size=12, fill=VERMILION)
    c.text(right + 16, oy + 14, f"{threads} threads x {vec} cells", size=12)
    c.text(right + 16, oy + 30, f"= {strip} columns", size=12)
    c.text(right + 16, oy + 56, f"rows ya .. ya+{rows - 1}:", size=12)
    c.text(right + 16, oy + 72, "computed", size=12)
    c.text(right + 16, oy + 98, "rows ya-1, ya+" + str(rows) + ":", size=12, fill=MUTED)
    c.text(right + 16, oy + 114, "the neighbours' rows", size=12, fill=MUTED)
    c.legend(right + 16, oy + 126, [(tint(ORANGE, 0.2), None, "halo cells")], size=12)
    # Bytes in flight, per thread: lab 1 against lab 4.
    ty0 = oy + window * rh + 48
    c.text(24, ty0, "bytes in flight per thread, over time (each bar: one load, from request to arrival)",
           size=13, weight="bold")
    t0, span = 150, 430
    c.text(t0 - 10, ty0 + 26, "lab 1: 4 B", size=12, anchor="end")
    c.rect(t0, ty0 + 16, span * 0.55, 12, fill=tint(SKY, 0.3))
    c.rect(t0 + span * 0.55, ty0 + 16, 40, 12, fill=GREEN)
    c.text(t0 + span * 0.55 + 46, ty0 + 26, "compute 1 cell, then the next load", size=11, fill=MUTED)
    c.text(t0 - 10, ty0 + 48 + window * 7, f"lab 4: {in_flight} B", size=12, anchor="end")
    for j in range(window):
        c.rect(t0 + j * 6, ty0 + 40 + j * 14, span * 0.55, 11, fill=tint(BLUE, 0.35))
    done = t0 + (window - 1) * 6 + span * 0.55
    c.rect(done, ty0 + 40, 60, window * 14 - 3, fill=GREEN)
    c.text(done + 66, ty0 + 52, f"compute {rows} rows x {vec} cells", size=11, fill=MUTED)
    c.text(done + 66, ty0 + 68, "from registers and the row buffer", size=11, fill=MUTED)
    # The row buffer.
    by0 = ty0 + 40 + window * 14 + 30
    c.text(24, by0, f"the row buffer: __shared__ float rowbuf[2][{row_buf}]; rows alternate halves", size=13,
           weight="bold")
    cells = [("pad", pad - 1, tint(GREY, 0.6)), ("x0-1", 1, tint(ORANGE, 0.2)), (f"{strip} cells of the row", strip, tint(SKY, 0.35)),
             ("x0+" + str(strip), 1, tint(ORANGE, 0.2)), ("pad", row_buf - pad - strip - 1, tint(GREY, 0.6))]
    scale = 560 / row_buf
    for half in range(2):
        x = 60.0
        y = by0 + 12 + half * 26
        c.text(52, y + 14, f"[{half}]", size=11, anchor="end", family=MONO, fill=MUTED)
        for name, n, fill in cells:
            w = max(n * scale, 9)
            c.rect(x, y, w, 18, fill=fill, stroke="#ffffff", sw=0.8)
            if n == strip:
                c.text(x + w / 2, y + 13, f"row ya+{half} (then ya+{half + 2}, ...): {strip} floats, float4 "
                                          "stores 16-byte aligned", size=11, anchor="middle")
            x += w
    c.text(700, by0 + 26, f"x-1 and x+{vec} of each", size=11, fill=MUTED)
    c.text(700, by0 + 40, "thread come from here;", size=11, fill=MUTED)
    c.text(700, by0 + 54, "y-1 and y+1 from its", size=11, fill=MUTED)
    c.text(700, by0 + 68, "own registers", size=11, fill=MUTED)
    # Sweeps kept on the GPU.
    sy = by0 + 100
    c.text(24, sy, "steps on the GPU: one launch per sweep on the stream, the host only swaps two pointers",
           size=13, weight="bold")
    for i in range(4):
        x = 24 + i * 196
        src, dst = ("d_a", "d_b") if i % 2 == 0 else ("d_b", "d_a")
        c.rect(x, sy + 10, 160, 24, fill=tint(GREEN, 0.7), rx=4)
        c.text(x + 80, sy + 27, f"sweep {i}: {src} to {dst}", size=12, anchor="middle")
        c.arrow(x + 162, sy + 22, x + 192, sy + 22, sw=1.2, head=6)
    c.text(24 + 4 * 196, sy + 27, "...", size=13)
    return c
