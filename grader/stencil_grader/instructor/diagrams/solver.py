"""The diagrams of labs 7 and 8, each drawn from the lab's own source.

    reduction_tree(kit)    lab 7: per-thread sums, the warp's shuffle tree, the block's warps, the
                           partials and the last block that adds them in index order
    overlapped_tile(kit)   lab 8: the overlapped tile of K sweeps, its shrinking valid region, the
                           redundant ring, and two neighbouring tiles' overlap
    pipeline_ring(kit)     lab 8: the reference's warp strip with its halo columns, the cp.async
                           ring of rows in flight, and the K stages handing rows down

Each returns a Canvas whose title is the picture's alt text.
"""

from __future__ import annotations

from pathlib import Path

from ...grading.build import impl_source
from . import constants
from .svg import BLUE, GREEN, GREY, INK, LINE, MONO, MUTED, ORANGE, PURPLE, SKY, VERMILION, Canvas, tint


# ---------------------------------------------------------------- lab 7

def reduction_tree(kit: Path) -> Canvas:
    """Lab 7: the starter's reduction (RES_THREADS threads of WARP lanes, RES_WARPS warps a block)."""
    threads, warp, warps = constants.need(impl_source("07-reduction-residual", "starter", kit),
                                          "RES_THREADS", "WARP", "RES_WARPS")
    offsets = []
    o = warp // 2
    while o >= 1:
        offsets.append(o)
        o //= 2
    alt = (f"The residual's reduction tree. Each thread first adds its own cells. A warp's {warp} lanes are "
           f"added by shuffles at offsets {', '.join(map(str, offsets))}, lane i taking lane i + offset, until "
           f"lane 0 holds the warp's sum; the {warps} warps' sums of a {threads}-thread block go through "
           f"shared memory to warp 0, which adds them the same way; each block writes one partial; the block "
           f"that takes the last ticket from an integer counter adds all the partials in index order.")
    c = Canvas.titled(740, alt, "Lab 7: a reduction whose order of additions never depends on timing")
    lane_w, x0, y0, level_h = 22, 100, 72, 44
    c.text(24, y0 - 18, "1. per thread: its own cells, added in a fixed order (a grid-stride loop)", size=12)
    for k in range(len(offsets) + 1):
        y = y0 + k * level_h
        live = warp >> k                               # lanes whose value still matters
        label = "lanes" if k == 0 else f"+{offsets[k - 1]}"
        c.text(x0 - 10, y + 14, label, size=11, anchor="end", fill=MUTED, family=MONO)
        for lane in range(warp):
            fill = tint(SKY, 0.2) if lane < live else "#f1f3f6"
            c.rect(x0 + lane * lane_w, y, lane_w - 4, 18, fill=fill, stroke=LINE if lane >= live else None,
                   sw=0.6)
            if k == 0:
                c.text(x0 + lane * lane_w + (lane_w - 4) / 2, y + 13, str(lane), size=9, anchor="middle")
        if k:
            off = offsets[k - 1]
            for lane in range(live):
                tx = x0 + lane * lane_w + (lane_w - 4) / 2
                c.line(tx, y - level_h + 18, tx, y, stroke=GREY, sw=0.7)
                c.line(x0 + (lane + off) * lane_w + (lane_w - 4) / 2, y - level_h + 18, tx, y, stroke=BLUE, sw=0.8)
    last = y0 + len(offsets) * level_h
    c.text(x0, last + 38, "2. per warp: v += __shfl_down_sync(0xffffffff, v, offset): lane i adds lane i + offset",
           size=12)
    c.text(x0, last + 54, "(blue); no shared memory, no barrier; after the last step lane 0 holds the warp's sum",
           size=12)
    # 3. per block
    by = last + 90
    c.text(24, by, f"3. per block: lane 0 of each of the {warps} warps writes its sum to shared memory; after "
                   "__syncthreads(),", size=12)
    c.text(24, by + 16, "warp 0 adds those sums with the same shuffles", size=12)
    bx = x0
    for w in range(warps):
        x = bx + w * 80
        c.rect(x, by + 30, 64, 22, fill=tint(GREEN, 0.5), rx=3)
        c.text(x + 32, by + 45, f"warp {w}", size=11, anchor="middle")
        c.arrow(x + 32, by + 54, bx + warps * 40 - 30 + w * 8, by + 88, stroke=GREEN, sw=0.9, head=5)
    c.rect(bx + warps * 40 - 90, by + 90, 180, 24, fill=GREEN, rx=3)
    c.text(bx + warps * 40, by + 106, "the block's sum, thread 0", size=12, anchor="middle", fill="#ffffff")
    # 4. across blocks
    gy = by + 150
    c.text(24, gy, "4. across blocks: block b stores its sum in g_partials[b], calls __threadfence(), then takes "
                   "a ticket", size=12)
    c.text(24, gy + 16, "with an integer atomicAdd on a counter (integer addition is exact, in any order)", size=12)
    tickets = (3, 0, 5, 1, 4, 2)                       # the order blocks happened to finish: it varies
    pw = 100
    for b, t in enumerate(tickets):
        x = x0 + b * pw
        last_one = t == len(tickets) - 1
        c.rect(x, gy + 30, 86, 24, fill=ORANGE if last_one else "#ffffff", stroke=INK, sw=0.8, rx=3)
        c.text(x + 43, gy + 46, f"g_partials[{b}]", size=10, anchor="middle", family=MONO)
        c.text(x + 43, gy + 70, f"ticket {t}", size=11, anchor="middle", fill=VERMILION if last_one else MUTED)
        c.arrow(x + 43, gy + 76, x0 + len(tickets) * pw / 2 - 50 + b * 20, gy + 110, stroke=GREY, sw=0.9, head=5)
    fx = x0 + len(tickets) * pw / 2 - 150
    c.rect(fx, gy + 112, 300, 24, fill=tint(ORANGE, 0.5), rx=3)
    c.text(fx + 150, gy + 128, "the last ticket: [0] + [1] + [2] + ... in index order", size=12, anchor="middle")
    last = len(tickets) - 1
    c.text(24, gy + 160, f"In this grid of {len(tickets)} blocks the tickets run 0 to {last}; the block that draws "
                         f"ticket {last}, the last (here block {tickets.index(last)}),", size=12)
    c.text(24, gy + 176, "adds the partials by the same tree, writes *d_result and resets the counter.", size=12)
    c.text(24, gy + 194, "Which block is last varies from run to run; the order of the additions does not.",
           size=12, fill=MUTED)
    return c


# ---------------------------------------------------------------- lab 8

def redundancy(k: int, tx: int, ty: int) -> float:
    """Updates per useful update of an overlapped tile of tx x ty outputs over k sweeps (handout 8,
    "Design 1"): sweep s computes (tx + 2(k - s)) x (ty + 2(k - s)) cells."""
    updates = sum((tx + 2 * (k - s)) * (ty + 2 * (k - s)) for s in range(1, k + 1))
    return updates / (k * tx * ty)


def overlapped_tile(kit: Path) -> Canvas:
    """Lab 8, design 1: the known-good overlapped tile (TX x TY outputs, K_MAX sweeps) of
    reference/tour/08-temporal-blocking/good_overlapped_tile."""
    k, tx, ty = constants.need(Path(kit) / "reference" / "tour" / "08-temporal-blocking" / "good_overlapped_tile"
                               / "kernel.cu", "K_MAX", "TX", "TY")
    lx, ly = tx + 2 * k, ty + 2 * k
    r = redundancy(k, tx, ty)
    smem = 2 * lx * ly * 4
    alt = (f"The overlapped tile of K = {k} sweeps: a {tx} x {ty} output tile loads a halo of {k} cells on every "
           f"side, {lx} x {ly} cells. Sweep s computes the region s cells inside the loaded one, so the valid "
           f"region shrinks by one cell per sweep; a cell d cells inside the edge is computed d times and then "
           f"left behind: {r:.2f} updates per useful one. The neighbouring tile loads a region that overlaps "
           f"this one by {2 * k} columns.")
    c = Canvas.titled(510, alt, f"Lab 8, design 1: an overlapped tile of K = {k} sweeps, and its redundant halo work")
    cell, ox, oy = 3.0, 40, 76
    for d in range(k):                                   # ring d: d cells inside the loaded region's edge
        shade = tint(ORANGE, 0.85 - 0.7 * d / max(1, k - 1))
        c.rect(ox + d * cell, oy + d * cell, (lx - 2 * d) * cell, (ly - 2 * d) * cell, fill=shade)
    c.rect(ox + k * cell, oy + k * cell, tx * cell, ty * cell, fill=GREEN)
    for d in range(1, k + 1):                            # the valid region after sweep d
        c.rect(ox + d * cell, oy + d * cell, (lx - 2 * d) * cell, (ly - 2 * d) * cell, stroke="#ffffff", sw=0.6)
    c.rect(ox, oy, lx * cell, ly * cell, stroke=INK, sw=1.4)
    # the right-hand neighbour's loaded region
    nx0 = ox + tx * cell
    c.rect(nx0, oy - 8, lx * cell, ly * cell + 16, stroke=BLUE, sw=1.6, dash="6,3")
    c.text(nx0 + lx * cell - 6, oy - 14, "the next tile's loaded region", size=11, anchor="end", fill=BLUE)
    c.rect(nx0, oy, 2 * k * cell, ly * cell, fill=BLUE, opacity=0.18)
    c.text(nx0 + k * cell, oy + ly * cell + 22, f"{2 * k} columns loaded", size=11, anchor="middle", fill=BLUE)
    c.text(nx0 + k * cell, oy + ly * cell + 36, "by both tiles", size=11, anchor="middle", fill=BLUE)
    c.text(ox + lx * cell / 2, oy + ly * cell / 2 + 5, f"{tx} x {ty} output tile: stored", size=13,
           anchor="middle", fill="#ffffff", weight="bold")
    c.text(ox, oy + ly * cell + 22, f"loaded: ({tx} + 2K) x ({ty} + 2K) = {lx} x {ly} cells", size=12)
    # legend
    ly0 = oy + ly * cell + 56
    c.legend(40, ly0, [(GREEN, None, "computed in every sweep, stored"),
                       (tint(ORANGE, 0.15), None, f"{k - 1} cells inside the edge: computed {k - 1} times")],
             size=12)
    c.legend(440, ly0, [(tint(ORANGE, 0.5), None, f"{k // 2} cells inside: computed {k // 2} times"),
                        (tint(ORANGE, 0.85), None, "the outermost ring: loaded, never computed")], size=12)
    c.text(40, ly0 + 48, f"white lines: the valid region after sweeps 1, 2, ..., {k}", size=12, fill=MUTED)
    sy = ly0 + 80
    c.text(24, sy, "Sweep s reads one shared buffer and writes the other, one cell further in than sweep s-1; a "
                   "barrier between sweeps.", size=12)
    c.text(24, sy + 18, f"Updates per useful update: R = {r:.2f}. Shared memory: 2 buffers x {lx} x {ly} x 4 B = "
                        f"{smem:,} B per block.", size=12)
    c.text(24, sy + 36, "A larger K divides the DRAM traffic further and costs redundant work; a larger tile buys "
                        "it back, but fewer blocks fit.", size=11, fill=MUTED)
    return c


def ring_slots(n: int) -> int:
    """Slots of the reference's cp.async ring for n rows in flight: the smallest power of two >= n
    (reference/08-temporal-blocking/kernel.cu, ring_slots)."""
    return 1 if n <= 1 else 2 * ring_slots((n + 1) // 2)


def pipeline_ring(kit: Path) -> Canvas:
    """Lab 8, the reference: a warp's strip (WARP x VEC columns, HALO each side), the ring of rows in
    flight (AHEAD ahead, ring_slots(AHEAD + 1) slots) and the K_MAX stages."""
    k, vec, seg, warp, strip, halo, stored, ahead = constants.need(
        impl_source("08-temporal-blocking", "reference", kit), "K_MAX", "VEC", "SEG", "WARP", "STRIP", "HALO", "STORED",
        "AHEAD")
    ring = ring_slots(ahead + 1)
    alt = (f"The reference's pipeline: a warp owns {strip} columns, {warp} lanes of {vec}, with {halo} halo columns "
           f"on each side; after sweep s the outer s columns are wrong, and only the middle {stored} are stored. "
           f"Rows arrive by cp.async {ahead} rows ahead into a ring of {ring} slots per thread; each of the {k} "
           f"stages keeps its north and mid rows in registers and hands the row it computes to the next stage "
           f"as its south row; a segment of {seg} stored rows computes {seg + 2 * k}.")
    c = Canvas.titled(470, alt, f"Lab 8, the reference: K = {k} stages in registers, rows arriving by cp.async")
    # The strip and the columns each sweep spoils.
    cw, ox, oy = 4.2, 60, 62
    c.text(24, oy - 6, f"one warp's strip: {warp} lanes x {vec} columns; rows below: the columns still right "
                       "after each sweep", size=12, fill=MUTED)
    for col in range(strip):
        in_halo = col < halo or col >= strip - halo
        c.rect(ox + col * cw, oy + 4, cw, 14, fill=tint(GREY, 0.5) if in_halo else GREEN, stroke="#ffffff", sw=0.4)
    for lane in range(0, warp + 1, 4):
        c.line(ox + lane * vec * cw, oy + 2, ox + lane * vec * cw, oy + 20, stroke=INK, sw=0.6)
    c.text(ox - 6, oy + 16, "load", size=10, anchor="end", fill=MUTED)
    for s_ in range(1, k + 1):
        y = oy + 22 + s_ * 9
        c.rect(ox, y, strip * cw, 7, fill=tint(GREEN, 0.6))
        c.rect(ox, y, s_ * cw, 7, fill=VERMILION)
        c.rect(ox + (strip - s_) * cw, y, s_ * cw, 7, fill=VERMILION)
        if s_ in (1, k):
            c.text(ox - 6, y + 7, f"sweep {s_}", size=10, anchor="end", fill=MUTED)
    right = ox + strip * cw
    c.text(right + 10, oy + 16, f"{halo} halo + {stored} stored", size=11)
    c.text(right + 10, oy + 30, f"+ {halo} halo columns", size=11)
    c.text(right + 10, oy + 52, "red: wrong, since lanes 0 and", size=11, fill=VERMILION)
    c.text(right + 10, oy + 66, f"{warp - 1} shuffle in their own cells;", size=11, fill=VERMILION)
    c.text(right + 10, oy + 80, f"after {k} sweeps, exactly the halo", size=11, fill=VERMILION)
    # The ring and the stages.
    py = 200
    c.text(24, py, "each thread, each iteration (one row): the ring feeds stage 0; stage j hands its row to "
                   "stage j+1", size=13, weight="bold")
    rx, ry = 40, py + 26
    c.text(rx, ry - 4, f"cp.async ring: {ring} slots x 16 B", size=11, fill=MUTED)
    for slot in range(ring):
        ahead_by = (ring - 1 - slot)
        y = ry + slot * 30
        label = "row y0: read now" if ahead_by == 0 else f"row y0+{ahead_by}: in flight" if ahead_by <= ahead             else "free"
        fill = GREEN if ahead_by == 0 else tint(PURPLE, 0.55) if ahead_by <= ahead else "#f1f3f6"
        c.rect(rx, y + 4, 150, 24, fill=fill, stroke=INK, sw=0.7, rx=3, dash="4,2" if 0 < ahead_by <= ahead else None)
        c.text(rx + 8, y + 20, label, size=11)
    sx0, sw_ = 236, 66
    for j in range(k):
        x = sx0 + j * (sw_ + 8)
        y = ry + 4
        c.rect(x, y, sw_, 96, fill=tint(SKY, 0.6), stroke=INK, sw=0.8, rx=4)
        c.text(x + sw_ / 2, y + 16, f"stage {j}", size=11, anchor="middle", weight="bold")
        c.text(x + sw_ / 2, y + 34, f"time {j}:", size=10, anchor="middle", fill=MUTED)
        c.text(x + sw_ / 2, y + 48, "north, mid", size=10, anchor="middle")
        c.text(x + sw_ / 2, y + 66, "computes", size=10, anchor="middle", fill=MUTED)
        c.text(x + sw_ / 2, y + 80, f"row y0-{j + 1}", size=10, anchor="middle", family=MONO)
        if j < k - 1:
            c.arrow(x + sw_, y + 48, x + sw_ + 8, y + 48, sw=1.2, head=5)
    c.arrow(rx + 152, ry + (ring - 1) * 30 + 16, sx0 - 2, ry + 52, stroke=GREEN, sw=1.4, head=6)
    last_x = sx0 + (k - 1) * (sw_ + 8) + sw_ / 2
    c.arrow(last_x, ry + 102, last_x, ry + 132, sw=1.2, head=6)
    c.text(last_x + sw_ / 2, ry + 148, f"row y0-{k}: stored", size=11, anchor="end")
    c.text(sx0, ry + 122, "arrows: the row a stage computes is the next stage's south row, in registers",
           size=11, fill=MUTED)
    ny_ = ry + ring * 30 + 50
    c.text(24, ny_, f"A thread owns the same {vec} columns at every time, so rows never cross threads: only "
                    "the two end cells of each", size=12)
    c.text(24, ny_ + 16, "stage's mid row come from the neighbouring lanes (__shfl_up_sync, __shfl_down_sync). "
                         "No barrier: a thread", size=12)
    c.text(24, ny_ + 32, "reads only the ring slots it copied itself, after cp.async.wait_group.", size=12)
    c.text(24, ny_ + 48, f"A segment of {seg} stored rows computes {seg} + 2 x {k} = {seg + 2 * k}: its pipeline "
                         f"starts {k} rows above it and ends {k} rows below.", size=12)
    return c
