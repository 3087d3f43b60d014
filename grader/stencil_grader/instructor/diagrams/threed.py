"""The 3D labs' diagrams (labs 5 and 6), each drawn from the lab's own source (as twod.py's)."""

from __future__ import annotations

from pathlib import Path

from ...grading.build import impl_source
from . import constants
from .sketch import GREEN, GREY, INK, MUTED, ORANGE, PURPLE, SKY, VERMILION, WHITE, Sketch, tint

ROLE = {-1: (SKY, "prev"), 0: (GREEN, "curr"), 1: (ORANGE, "next")}


def three_planes(kit: Path) -> Sketch:
    """Lab 5: the starter's tile (TILE_X x TILE_Y, PAD_X, PLANE_X, IN_TILE_Y, BLOCK_Y,
    ROWS_PER_THREAD, PLANES_PER_BLOCK) marching along z with three rotating shared planes."""
    tile_x, tile_y, pad, plane_x, in_y, block_y, rows, planes, vec = constants.need(
        impl_source("05-z-coarsening", "starter", kit), "TILE_X", "TILE_Y", "PAD_X", "PLANE_X", "IN_TILE_Y", "BLOCK_Y",
        "ROWS_PER_THREAD", "PLANES_PER_BLOCK", "VEC")
    alt = (f"Lab 5's z-march: a block computes a {tile_x} x {tile_y} tile of {planes} planes. Three shared "
           f"planes hold z-1, z and z+1, and the loads of plane z+2 are in flight in registers; after each "
           f"plane the three slot indices rotate and nothing is copied. A shared plane is {plane_x} x {in_y} "
           f"floats: the tile, a float4 of padding on each side holding the x-halo cells, and a halo row "
           f"above and below.")
    s = Sketch(880, 650, alt, "Lab 5: three shared planes march along z; their roles rotate, no plane is copied")
    # The march, seen from the side: the block's planes zb-1 .. zb+P along z.
    sx, sy, bar, z_now = 40, 64, 5.2, 9           # z_now: the plane shown as "z", counted from the block's first
    s.text(sx, sy, f"one block's column of {planes} planes", 12, MUTED)
    for i in range(planes + 2):
        offset = i - 1 - z_now
        fill = (ROLE[offset][0] if -1 <= offset <= 1 else tint(PURPLE, 0.2) if offset == 2
                else "#dfe3e9" if i in (0, planes + 1) else "#f1f3f6")
        s.box(sx + 20, sy + 12 + i * bar, 150, bar - 1, fill)
    s.text(sx + 178, sy + 16, "zb-1: z halo", 10, MUTED)
    s.text(sx + 178, sy + 16 + (planes + 1) * bar, f"zb+{planes}: z halo", 10, MUTED)
    for k, label in enumerate(("z-1: prev", "z: curr", "z+1: next", "z+2: in flight")):
        bar_y, label_y = sy + 12 + (z_now + k) * bar + bar / 2, sy + 58 + k * 22
        s.line([sx + 170, sx + 176, sx + 184, sx + 190], [bar_y, bar_y, label_y - 4, label_y - 4], MUTED, 0.8)
        s.text(sx + 194, label_y, label, 11)
    s.arrow(sx + 8, sy + 14, sx + 8, sy + 12 + (planes + 2) * bar)
    s.text(sx + 4, sy + 28 + (planes + 2) * bar, "z", style="italic")
    # The rotation of the three slots over four steps.
    tx0, ty0, colw = 330, 64, 132
    s.text(tx0, ty0, "the three shared slots, step by step (one __syncthreads() each)", 12, MUTED)
    for step in range(4):
        x = tx0 + step * colw
        s.text(x + 56, ty0 + 22, f"step z = zb+{step}" if step else "step z = zb", ha="center", weight="bold")
        for slot in range(3):
            offset = (slot - step) % 3 - 1           # slot 0 holds zb-1 first, then zb+2, ...
            plane, y = step + offset, ty0 + 34 + slot * 38
            s.box(x, y, 112, 30, tint(ROLE[offset][0], 0.25), INK, 0.8)
            s.text(x + 8, y + 13, f"slot {slot}", 10, MUTED, family="monospace")
            s.text(x + 8, y + 26, f"zb{plane:+d}" if plane else "zb", family="monospace")
            s.text(x + 104, y + 26, ROLE[offset][1], ha="right")
        y = ty0 + 34 + 3 * 38 + 8
        s.box(x, y, 112, 30, tint(PURPLE, 0.6), PURPLE, 0.8, dash=True)
        s.text(x + 8, y + 13, "registers", 10, MUTED, family="monospace")
        s.text(x + 8, y + 26, f"zb+{step + 2} in flight", family="monospace")
        if step < 3:                                  # stored next step into the slot that held zb+step-1
            s.arrow(x + 114, y + 15, x + colw, ty0 + 34 + step * 38 + 15, PURPLE, bend=0.3)
    s.text(tx0, ty0 + 216, "each step: store the plane that arrived into the free slot, issue\nthe loads of the one "
                           "after it, __syncthreads(), compute plane z,\nthen rename:  prev = curr; curr = next; "
                           "next = the old prev", linespacing=1.35)
    # One shared plane's layout, and one thread's cells in it.
    py0, cw, ch, ox, me_tx, me_ty = 350, 4.6, 10, 40, 5, 2
    oy = py0 + 14
    s.text(24, py0, f"one shared plane: planes[slot][{in_y}][{plane_x}] floats", 13, weight="bold")
    for r in range(1, tile_y + 1):                     # the tile's rows, as thread rows store them
        s.box(ox + pad * cw, oy + r * ch, tile_x * cw, ch, tint(SKY if r - 1 < block_y else ORANGE, 0.45))
    for c in (pad - 1, pad + tile_x):                   # the halo columns
        s.box(ox + c * cw, oy + ch, cw, tile_y * ch, VERMILION)
    for r in (0, in_y - 1):                             # the halo rows
        s.box(ox + pad * cw, oy + r * ch, tile_x * cw, ch, GREEN)
    s.grid(ox, oy, plane_x, in_y, cw, ch, lw=0.3)
    s.box(ox, oy, plane_x * cw, in_y * ch, edge=INK, lw=1.2)
    for k in range(rows):
        s.box(ox + (pad + vec * me_tx) * cw, oy + (1 + me_ty + k * block_y) * ch, vec * cw, ch, edge=INK, lw=1.8)
    ly = oy + in_y * ch + 18
    s.legend(40, ly, [(tint(SKY, 0.45), None, f"rows 0-{block_y - 1}: thread row ty stores its first row ty"),
                      (tint(ORANGE, 0.45), None, f"rows {block_y}-{2 * block_y - 1}: its second row, ty + {block_y}"),
                      (WHITE, INK, f"thread ({me_tx}, {me_ty}): a float4 in each of its {rows} rows")])
    s.legend(470, ly, [(GREEN, None, f"halo rows: thread rows 0 and {block_y - 1}"),
                       (VERMILION, None, f"halo columns: threads 0-{2 * tile_y - 1}, one cell each"),
                       (WHITE, None, f"padding: {pad} floats a side, float4s aligned")])
    s.text(24, ly + 74, "prev and next are read only at a thread's own cells, which it stored itself: lab 6 "
                        "keeps them in registers.", 11, MUTED)
    return s


def register_window(kit: Path) -> Sketch:
    """Lab 6: the reference's ring of RING = AHEAD + 3 planes in registers per thread, turning one slot
    per step, beside the one shared plane of the block (BLOCK_X x ROWS threads, OUT_ROWS computing)."""
    block_x, out_rows, rows, ahead, ring = constants.need(
        impl_source("06-register-tiling", "reference", kit), "BLOCK_X", "OUT_ROWS", "ROWS", "AHEAD", "RING")
    (starter_ahead,) = constants.need(impl_source("06-register-tiling", "starter", kit), "AHEAD")
    tile_x = block_x * 4                               # one float4 per thread and plane: the design
    alt = (f"Lab 6: each thread keeps {ring} planes of its own float4 column in registers, z-1 to "
           f"z+{ring - 2}, with {ahead} planes of loads in flight beyond z+1; only plane z is stored in the one "
           f"shared plane of the block ({tile_x} x {rows} cells), for the x-y neighbours. At the start of each "
           f"step the slot of plane z-2, which nobody needs any more, receives the request for plane "
           f"z+{ring - 2}, so the ring turns without moving a register.")
    s = Sketch(880, 510, alt, "Lab 6: z neighbours in registers, one shared plane")
    s.text(24, 46, f"one thread's ring of {ring} float4 registers: AHEAD = {ahead} planes of loads in flight "
                   f"beyond z+1 (the starter's AHEAD: {starter_ahead})", 12, MUTED)
    roles = {-1: (SKY, "z-1: read as zm"), 0: (GREEN, "z: stored to the plane"), 1: (ORANGE, "z+1: read as zp")}
    colw, x0, y0, h = 200, 24, 78, 34
    for step in range(3):
        x = x0 + step * colw
        s.text(x + 85, y0 - 8, f"step z = zb+{step}" if step else "step z = zb", ha="center", weight="bold")
        for slot in range(ring):
            j = (slot - step) % ring - 1                # slot of plane z+j at this step: (step + 1 + j) % ring
            fill, label = roles.get(j, (tint(PURPLE, 0.55), f"z+{j}: in flight"))
            newest, y = j == ring - 2, y0 + slot * (h + 6)
            s.box(x, y, 170, h, tint(PURPLE, 0.85) if newest else tint(fill, 0.15), INK, 0.8, dash=j >= 2)
            s.text(x + 8, y + 14, f"q[{slot}]", 11, MUTED, family="monospace")
            s.text(x + 8, y + 28, f"z+{j}: requested now" if newest else label, 11)
    s.text(x0, y0 + ring * (h + 6) + 12, f"the slot of plane z is (step + 1) % {ring}, a constant in each of the "
                                         f"{ring} unrolled\nsteps of the z loop: the ring turns, and no register is "
                                         "ever copied", linespacing=1.35)
    # The one shared plane.
    px, py, cw, ch = 640, 78, 1.5, 12
    s.text(px, py - 8, "the block's one shared plane", weight="bold")
    for r in range(rows):
        s.box(px, py + r * ch, tile_x * cw, ch - 1, tint(GREEN, 0.85 if r in (0, rows - 1) else 0.55))
    s.box(px - 4, py + ch, 3, (rows - 2) * ch - 1, VERMILION)
    s.box(px + tile_x * cw + 1, py + ch, 3, (rows - 2) * ch - 1, VERMILION)
    s.box(px - 5, py - 1, tile_x * cw + 10, rows * ch + 1, edge=INK)
    bottom = py + rows * ch
    s.text(px, bottom + 18, f"{block_x} x {rows} threads, one float4\neach: a {tile_x} x {out_rows} tile plus\n"
                            "a halo row above and below", 11, linespacing=1.35)
    s.text(px, bottom + 63, "(paler rows: they load only)", 11, MUTED)
    s.text(px, bottom + 84, "red: the x-halo cells", 11, VERMILION)
    # Each step.
    sy, x = 384, 24
    s.text(24, sy, "each step, in every thread:", 13, weight="bold")
    steps = ("store q[z] in the plane", f"request plane z+{ring - 2}", "__syncthreads()", "compute plane z",
             "__syncthreads()")
    for i, text in enumerate(steps):
        w = len(text) * 6.6 + 20
        s.box(x, sy + 12, w, 26, tint(GREY if "sync" in text else SKY if i == 1 else GREEN, 0.7))
        s.text(x + w / 2, sy + 30, text, 11, ha="center")
        x += w + 14
        if i < len(steps) - 1:
            s.arrow(x - 13, sy + 25, x - 2, sy + 25)
    s.text(24, sy + 62, "compute: the x and y neighbours from the plane, z-1 and z+1 from the thread's own registers.")
    s.text(24, sy + 80, "Two barriers per plane: a thread may overwrite the plane only after everyone has read it,\n"
                        "and read it only after everyone has stored it. A load in flight holds its register until "
                        "its plane is used.", 12, MUTED, linespacing=1.35)
    return s
