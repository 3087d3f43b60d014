"""The diagrams of labs 7 and 8, each drawn from the lab's own source (as twod.py's)."""

from __future__ import annotations

from pathlib import Path

from ...grading.build import impl_source
from ..roofs import tile_redundancy
from . import constants
from .sketch import BLUE, GREEN, GREY, INK, LINE, MUTED, ORANGE, PURPLE, SKY, VERMILION, WHITE, Sketch, tint


def reduction_tree(kit: Path) -> Sketch:
    """Lab 7: the starter's reduction (RES_THREADS threads of WARP lanes, RES_WARPS warps a block)."""
    threads, warp, warps = constants.need(impl_source("07-reduction-residual", "starter", kit),
                                          "RES_THREADS", "WARP", "RES_WARPS")
    offsets = [warp >> k for k in range(1, warp.bit_length())]
    alt = (f"The residual's reduction tree. Each thread first adds its own cells. A warp's {warp} lanes are "
           f"added by shuffles at offsets {', '.join(map(str, offsets))}, lane i taking lane i + offset, until "
           f"lane 0 holds the warp's sum; the {warps} warps' sums of a {threads}-thread block go through "
           f"shared memory to warp 0, which adds them the same way; each block writes one partial; the block "
           f"that takes the last ticket from an integer counter adds all the partials in index order.")
    s = Sketch(880, 740, alt, "Lab 7: a reduction whose order of additions never depends on timing")
    lane_w, x0, y0, level_h = 22, 100, 72, 44
    s.text(24, y0 - 18, "1. per thread: its own cells, added in a fixed order (a grid-stride loop)")
    for k in range(len(offsets) + 1):
        y, live = y0 + k * level_h, warp >> k          # lanes whose value still matters
        s.text(x0 - 10, y + 14, f"+{offsets[k - 1]}" if k else "lanes", 11, MUTED, ha="right", family="monospace")
        for lane in range(warp):
            s.box(x0 + lane * lane_w, y, lane_w - 4, 18, tint(SKY, 0.2) if lane < live else "#f1f3f6",
                  None if lane < live else LINE, 0.6)
            if k == 0:
                s.text(x0 + lane * lane_w + (lane_w - 4) / 2, y + 13, str(lane), 9, ha="center")
        for lane in range(live if k else 0):
            tx = x0 + lane * lane_w + (lane_w - 4) / 2
            s.line([tx, tx], [y - level_h + 18, y], GREY, 0.7)
            s.line([tx + offsets[k - 1] * lane_w, tx], [y - level_h + 18, y], BLUE, 0.8)
    last = y0 + len(offsets) * level_h
    s.text(x0, last + 38, f"2. per warp of {warp} lanes: v += __shfl_down_sync(0xffffffff, v, offset): lane i adds "
                          "lane i + offset\n"
                          "(blue); no shared memory, no barrier; after the last step lane 0 holds the warp's sum",
           linespacing=1.35)
    by = last + 90
    s.text(24, by, f"3. per block of {threads} threads: lane 0 of each of the {warps} warps writes its sum to shared "
                   "memory; after\n__syncthreads(), warp 0 adds those sums with the same shuffles", linespacing=1.35)
    for w in range(warps):
        x = x0 + w * 80
        s.box(x, by + 30, 64, 22, tint(GREEN, 0.5))
        s.text(x + 32, by + 45, f"warp {w}", 11, ha="center")
        s.arrow(x + 32, by + 54, x0 + warps * 40 - 30 + w * 8, by + 88, GREEN, 0.9)
    s.box(x0 + warps * 40 - 90, by + 90, 180, 24, GREEN)
    s.text(x0 + warps * 40, by + 106, "the block's sum, thread 0", colour=WHITE, ha="center")
    gy = by + 150
    s.text(24, gy, "4. across blocks: block b stores its sum in g_partials[b], calls __threadfence(), then takes "
                   "a ticket\nwith an integer atomicAdd on a counter (integer addition is exact, in any order)",
           linespacing=1.35)
    tickets = (3, 0, 5, 1, 4, 2)                       # the order blocks happened to finish: it varies
    final = len(tickets) - 1
    for b, t in enumerate(tickets):
        x = x0 + b * 100
        s.box(x, gy + 30, 86, 24, ORANGE if t == final else WHITE, INK, 0.8)
        s.text(x + 43, gy + 46, f"g_partials[{b}]", 10, ha="center", family="monospace")
        s.text(x + 43, gy + 70, f"ticket {t}", 11, VERMILION if t == final else MUTED, ha="center")
        s.arrow(x + 43, gy + 76, x0 + len(tickets) * 50 - 50 + b * 20, gy + 110, GREY, 0.9)
    fx = x0 + len(tickets) * 50 - 150
    s.box(fx, gy + 112, 300, 24, tint(ORANGE, 0.5))
    s.text(fx + 150, gy + 128, "the last ticket: [0] + [1] + [2] + ... in index order", ha="center")
    s.text(24, gy + 160, f"In this grid of {len(tickets)} blocks the tickets run 0 to {final}; the block that draws "
                         f"ticket {final}, the last (here block {tickets.index(final)}),\nadds the partials by the "
                         "same tree, writes *d_result and resets the counter.", linespacing=1.35)
    s.text(24, gy + 194, "Which block is last varies from run to run; the order of the additions does not.", 12, MUTED)
    return s


def overlapped_tile(kit: Path) -> Sketch:
    """Lab 8, design 1: the known-good overlapped tile (TX x TY outputs, K_MAX sweeps) of
    reference/tour/08-temporal-blocking/good_overlapped_tile."""
    k, tx, ty = constants.need(Path(kit) / "reference" / "tour" / "08-temporal-blocking" / "good_overlapped_tile"
                               / "kernel.cu", "K_MAX", "TX", "TY")
    lx, ly = tx + 2 * k, ty + 2 * k
    r = tile_redundancy(k, tx, ty)
    alt = (f"The overlapped tile of K = {k} sweeps: a {tx} x {ty} output tile loads a halo of {k} cells on every "
           f"side, {lx} x {ly} cells. Sweep s computes the region s cells inside the loaded one, so the valid "
           f"region shrinks by one cell per sweep; a cell d cells inside the edge is computed d times and then "
           f"left behind: {r:.2f} updates per useful one. The neighbouring tile loads a region that overlaps "
           f"this one by {2 * k} columns.")
    s = Sketch(880, 510, alt, f"Lab 8, design 1: an overlapped tile of K = {k} sweeps, and its redundant halo work")
    cell, ox, oy = 3.0, 40, 76
    for d in range(k):                                   # ring d: d cells inside the loaded region's edge
        s.box(ox + d * cell, oy + d * cell, (lx - 2 * d) * cell, (ly - 2 * d) * cell,
              tint(ORANGE, 0.85 - 0.7 * d / max(1, k - 1)))
    s.box(ox + k * cell, oy + k * cell, tx * cell, ty * cell, GREEN)
    for d in range(1, k + 1):                            # the valid region after sweep d
        s.box(ox + d * cell, oy + d * cell, (lx - 2 * d) * cell, (ly - 2 * d) * cell, edge=WHITE, lw=0.6)
    s.box(ox, oy, lx * cell, ly * cell, edge=INK, lw=1.4)
    nx0, bottom = ox + tx * cell, oy + ly * cell         # the right-hand neighbour's loaded region
    s.box(nx0, oy - 8, lx * cell, ly * cell + 16, edge=BLUE, lw=1.6, dash=True)
    s.text(nx0 + lx * cell - 6, oy - 14, "the next tile's loaded region", 11, BLUE, ha="right")
    s.box(nx0, oy, 2 * k * cell, ly * cell, BLUE, alpha=0.18)
    s.text(nx0 + k * cell, bottom + 22, f"{2 * k} columns loaded\nby both tiles", 11, BLUE, ha="center",
           linespacing=1.2)
    s.text(ox + lx * cell / 2, oy + ly * cell / 2 + 5, f"{tx} x {ty} output tile: stored", 13, WHITE, ha="center",
           weight="bold")
    s.text(ox, bottom + 22, f"loaded: ({tx} + 2K) x ({ty} + 2K) = {lx} x {ly} cells")
    ly0 = bottom + 56
    s.legend(40, ly0, [(GREEN, None, "computed in every sweep, stored"),
                       (tint(ORANGE, 0.15), None, f"{k - 1} cells inside the edge: computed {k - 1} times")])
    s.legend(440, ly0, [(tint(ORANGE, 0.5), None, f"{k // 2} cells inside: computed {k // 2} times"),
                        (tint(ORANGE, 0.85), None, "the outermost ring: loaded, never computed")])
    s.text(40, ly0 + 48, f"white lines: the valid region after sweeps 1, 2, ..., {k}", 12, MUTED)
    s.text(24, ly0 + 80, "Sweep s reads one shared buffer and writes the other, one cell further in than sweep s-1; "
                         f"a barrier between sweeps.\nUpdates per useful update: R = {r:.2f}. Shared memory: 2 buffers "
                         f"x {lx} x {ly} x 4 B = {2 * lx * ly * 4:,} B per block.", linespacing=1.5)
    s.text(24, ly0 + 116, "A larger K divides the DRAM traffic further and costs redundant work; a larger tile buys "
                          "it back, but fewer blocks fit.", 11, MUTED)
    return s


def ring_slots(n: int) -> int:
    """Slots of the reference's cp.async ring for n rows in flight: the smallest power of two >= n
    (reference/08-temporal-blocking/kernel.cu, ring_slots)."""
    return 1 if n <= 1 else 2 * ring_slots((n + 1) // 2)


def pipeline_ring(kit: Path) -> Sketch:
    """Lab 8, the reference: a warp's strip (WARP x VEC columns, HALO each side), the ring of rows in
    flight (AHEAD ahead, ring_slots(AHEAD + 1) slots) and the K_MAX stages."""
    k, vec, seg, warp, strip, halo, stored, ahead = constants.need(
        impl_source("08-temporal-blocking", "reference", kit), "K_MAX", "VEC", "SEG", "WARP", "STRIP", "HALO",
        "STORED", "AHEAD")
    ring = ring_slots(ahead + 1)
    alt = (f"The reference's pipeline: a warp owns {strip} columns, {warp} lanes of {vec}, with {halo} halo columns "
           f"on each side; after sweep s the outer s columns are wrong, and only the middle {stored} are stored. "
           f"Rows arrive by cp.async {ahead} rows ahead into a ring of {ring} slots per thread; each of the {k} "
           f"stages keeps its north and mid rows in registers and hands the row it computes to the next stage "
           f"as its south row; a segment of {seg} stored rows computes {seg + 2 * k}.")
    s = Sketch(880, 470, alt, f"Lab 8, the reference: K = {k} stages in registers, rows arriving by cp.async")
    cw, ox, oy = 4.2, 60, 62
    right = ox + strip * cw
    s.text(24, oy - 6, f"one warp's strip: {warp} lanes x {vec} columns; rows below: the columns still right "
                       "after each sweep", 12, MUTED)
    s.box(ox, oy + 4, strip * cw, 14, tint(GREY, 0.5))
    s.box(ox + halo * cw, oy + 4, (strip - 2 * halo) * cw, 14, GREEN)
    for lane in range(0, warp + 1, 4):
        s.line([ox + lane * vec * cw] * 2, [oy + 2, oy + 20], INK, 0.6)
    s.text(ox - 6, oy + 16, "load", 10, MUTED, ha="right")
    for sweep in range(1, k + 1):
        y = oy + 22 + sweep * 9
        s.box(ox, y, strip * cw, 7, VERMILION)
        s.box(ox + sweep * cw, y, (strip - 2 * sweep) * cw, 7, tint(GREEN, 0.6))
        if sweep in (1, k):
            s.text(ox - 6, y + 7, f"sweep {sweep}", 10, MUTED, ha="right")
    s.text(right + 10, oy + 16, f"{halo} halo + {stored} stored\n+ {halo} halo columns", 11, linespacing=1.2)
    s.text(right + 10, oy + 52, f"red: wrong, since lanes 0 and\n{warp - 1} shuffle in their own cells;\n"
                                f"after {k} sweeps, exactly the halo", 11, VERMILION, linespacing=1.2)
    # The ring and the stages.
    py = 200
    rx, ry, sx0, sw = 40, py + 26, 236, 66
    s.text(24, py, "each thread, each iteration (one row): the ring feeds stage 0; stage j hands its row to "
                   "stage j+1", 13, weight="bold")
    s.text(rx, ry - 4, f"cp.async ring: {ring} slots x 16 B", 11, MUTED)
    for slot in range(ring):
        ahead_by, y = ring - 1 - slot, ry + slot * 30
        flight = 0 < ahead_by <= ahead
        s.box(rx, y + 4, 150, 24, GREEN if ahead_by == 0 else tint(PURPLE, 0.55) if flight else "#f1f3f6", INK, 0.7,
              dash=flight)
        s.text(rx + 8, y + 20, "row y0: read now" if ahead_by == 0 else f"row y0+{ahead_by}: in flight" if flight
               else "free", 11)
    for j in range(k):
        x = sx0 + j * (sw + 8)
        s.box(x, ry + 4, sw, 96, tint(SKY, 0.6), INK, 0.8)
        s.text(x + sw / 2, ry + 20, f"stage {j}", 11, ha="center", weight="bold")
        s.text(x + sw / 2, ry + 38, f"time {j}:\nnorth, mid\ncomputes\nrow y0-{j + 1}", 10, ha="center",
               linespacing=1.3)
        if j < k - 1:
            s.arrow(x + sw, ry + 52, x + sw + 8, ry + 52)
    s.arrow(rx + 152, ry + (ring - 1) * 30 + 16, sx0 - 2, ry + 52, GREEN, 1.4)
    last_x = sx0 + (k - 1) * (sw + 8) + sw / 2
    s.arrow(last_x, ry + 102, last_x, ry + 132)
    s.text(last_x + sw / 2, ry + 148, f"row y0-{k}: stored", 11, ha="right")
    s.text(sx0, ry + 122, "arrows: the row a stage computes is the next stage's south row, in registers", 11, MUTED)
    s.text(24, ry + ring * 30 + 50, f"A thread owns the same {vec} columns at every time, so rows never cross threads: "
                                    "only the two end cells of each\nstage's mid row come from the neighbouring lanes "
                                    "(__shfl_up_sync, __shfl_down_sync). No barrier: a thread\nreads only the ring "
                                    "slots it copied itself, after cp.async.wait_group.\nA segment of "
                                    f"{seg} stored rows computes {seg} + 2 x {k} = {seg + 2 * k}: its pipeline starts "
                                    f"{k} rows above it and ends {k} rows below.", linespacing=1.35)
    return s
