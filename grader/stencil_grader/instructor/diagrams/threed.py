"""The 3D labs' diagrams (labs 5 and 6), each drawn from the lab's own source.

    three_planes(kit)      lab 5: the z-march, the three shared planes whose slot indices rotate,
                           the next plane in flight, and the layout of one shared plane
    register_window(kit)   lab 6: one thread's ring of planes in registers around the one shared
                           plane, and how the ring turns from one plane to the next

Each returns a Canvas whose title is the picture's alt text.
"""

from __future__ import annotations

from pathlib import Path

from ...grading.build import impl_source
from . import constants
from .svg import BLUE, GREEN, GREY, INK, MONO, MUTED, ORANGE, PURPLE, SKY, VERMILION, Canvas, tint

ROLE = {"z-1": SKY, "z": GREEN, "z+1": ORANGE}
ROW_COLOURS = (SKY, ORANGE, GREEN, PURPLE, GREY, BLUE, VERMILION)


def _plane_z(z: int) -> str:
    """"z", "z+1", "z-1" for an offset from the current plane."""
    return "z" if z == 0 else f"z+{z}" if z > 0 else f"z{z}"


def three_planes(kit: Path) -> Canvas:
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
    c = Canvas.titled(650, alt, "Lab 5: three shared planes march along z; their roles rotate, no plane is copied")
    # The march, seen from the side: the block's planes zb-1 .. zb+P along z.
    sx, sy, bar = 40, 64, 5.2
    c.text(sx, sy, f"one block's column of {planes} planes", size=12, fill=MUTED)
    z_now = 9                                     # the plane shown as "z", counted from the block's first
    for i in range(planes + 2):                   # zb-1 .. zb+P, top to bottom
        offset = i - 1 - z_now
        y = sy + 12 + i * bar
        role = _plane_z(offset) if -1 <= offset <= 1 else None
        fill = ROLE[role] if role else tint(PURPLE, 0.2) if offset == 2 else (
            "#dfe3e9" if i in (0, planes + 1) else "#f1f3f6")
        c.rect(sx + 20, y, 150, bar - 1, fill=fill)
    c.text(sx + 178, sy + 12 + 4, "zb-1: z halo", size=10, fill=MUTED)
    c.text(sx + 178, sy + 12 + (planes + 1) * bar + 4, f"zb+{planes}: z halo", size=10, fill=MUTED)
    for k, (offset, label) in enumerate(((-1, "z-1: prev"), (0, "z: curr"), (1, "z+1: next"),
                                          (2, "z+2: in flight"))):
        bar_y = sy + 12 + (z_now + 1 + offset) * bar + bar / 2
        label_y = sy + 58 + k * 22
        c.polyline([(sx + 170, bar_y), (sx + 176, bar_y), (sx + 184, label_y - 4), (sx + 190, label_y - 4)],
                   stroke=MUTED, sw=0.8)
        c.text(sx + 194, label_y, label, size=11)
    c.arrow(sx + 8, sy + 14, sx + 8, sy + 12 + (planes + 2) * bar, sw=1.2, head=6)
    c.text(sx + 4, sy + 28 + (planes + 2) * bar, "z", size=12, italic=True)
    # The rotation of the three slots over four steps.
    tx0, ty0, colw = 330, 64, 132
    c.text(tx0, ty0, "the three shared slots, step by step (one __syncthreads() each)", size=12, fill=MUTED)
    roles = ("z-1", "z", "z+1")
    for step in range(4):
        x = tx0 + step * colw
        c.text(x + 56, ty0 + 22, f"step z = zb+{step}" if step else "step z = zb", size=12, anchor="middle",
               weight="bold")
        for slot in range(3):
            role = roles[(slot - step) % 3]           # slot 0 holds zb-1 first, then zb+2, ...
            plane = step + (slot - step) % 3 - 1
            y = ty0 + 34 + slot * 38
            c.rect(x, y, 112, 30, fill=tint(ROLE[role], 0.25), stroke=INK, sw=0.8, rx=3)
            c.text(x + 8, y + 13, f"slot {slot}", size=10, fill=MUTED, family=MONO)
            c.text(x + 8, y + 26, f"zb{plane:+d}" if plane else "zb", size=12, family=MONO)
            c.text(x + 104, y + 26, {"z-1": "prev", "z": "curr", "z+1": "next"}[role], size=12, anchor="end")
        y = ty0 + 34 + 3 * 38 + 8
        c.rect(x, y, 112, 30, fill=tint(PURPLE, 0.6), stroke=PURPLE, sw=0.8, rx=3, dash="4,2")
        c.text(x + 8, y + 13, "registers", size=10, fill=MUTED, family=MONO)
        c.text(x + 8, y + 26, f"zb+{step + 2} in flight", size=12, family=MONO)
        if step < 3:
            target = ty0 + 34 + ((step) % 3) * 38 + 15      # the slot it is stored into next step
            c.curved_arrow(x + 114, y + 15, x + colw - 6, y + 4, x + colw, target, stroke=PURPLE, sw=1.2)
    ny_ = ty0 + 34 + 4 * 38 + 30
    c.text(tx0, ny_, "each step: store the plane that arrived into the free slot, issue", size=12)
    c.text(tx0, ny_ + 16, "the loads of the one after it, __syncthreads(), compute plane z,", size=12)
    c.text(tx0, ny_ + 32, "then rename:  prev = curr; curr = next; next = the old prev", size=12)
    # One shared plane's layout, and one thread's cells in it.
    py0 = 350
    c.text(24, py0, f"one shared plane: planes[slot][{in_y}][{plane_x}] floats", size=13, weight="bold")
    cw, ch, ox, oy = 4.6, 10, 40, py0 + 14
    me_tx, me_ty = 5, 2
    for r in range(in_y):
        for s_ in range(plane_x):
            body_r, body_s = 1 <= r <= tile_y, pad <= s_ < pad + tile_x
            if body_r and body_s:
                fill = tint(SKY, 0.45) if r - 1 < block_y else tint(ORANGE, 0.45)
            elif body_r and s_ in (pad - 1, pad + tile_x):
                fill = VERMILION                                 # the halo columns
            elif body_s and r in (0, in_y - 1):
                fill = GREEN                                     # the halo rows
            else:
                fill = "#ffffff"
            c.rect(ox + s_ * cw, oy + r * ch, cw, ch, fill=fill, stroke="#ffffff" if fill != "#ffffff" else None,
                   sw=0.3)
    c.rect(ox, oy, plane_x * cw, in_y * ch, stroke=INK, sw=1.2)
    for k in range(rows):
        r = 1 + me_ty + k * block_y
        c.rect(ox + (pad + vec * me_tx) * cw, oy + r * ch, vec * cw, ch, stroke=INK, sw=1.8)
    ly = oy + in_y * ch + 18
    c.legend(40, ly, [(tint(SKY, 0.45), None, f"rows 0-{block_y - 1}: thread row ty stores its first row ty"),
                      (tint(ORANGE, 0.45), None, f"rows {block_y}-{2 * block_y - 1}: its second row, ty + {block_y}"),
                      ("#ffffff", INK, f"thread ({me_tx}, {me_ty}): a float4 in each of its {rows} rows")],
             size=12)
    c.legend(470, ly, [(GREEN, None, f"halo rows: thread rows 0 and {block_y - 1}"),
                       (VERMILION, None, f"halo columns: threads 0-{2 * tile_y - 1}, one cell each"),
                       ("#ffffff", None, f"padding: {pad} floats a side, float4s aligned")], size=12)
    c.text(24, ly + 74, "prev and next are read only at a thread's own cells, which it stored itself: lab 6 "
                        "keeps them in registers.", size=11, fill=MUTED)
    return c


def register_window(kit: Path) -> Canvas:
    """Lab 6: the reference's ring of RING = AHEAD + 3 planes in registers per thread, turning one slot
    per step, beside the one shared plane of the block (BLOCK_X x ROWS threads, OUT_ROWS computing)."""
    block_x, out_rows, rows, ahead, ring = constants.need(
        impl_source("06-register-tiling", "reference", kit), "BLOCK_X", "OUT_ROWS", "ROWS", "AHEAD", "RING")
    (starter_ahead,) = constants.need(impl_source("06-register-tiling", "starter", kit), "AHEAD")
    vec = 4                                            # one float4 per thread and plane: the design
    tile_x = block_x * vec
    alt = (f"Lab 6: each thread keeps {ring} planes of its own float4 column in registers, z-1 to "
           f"z+{ring - 2}, with {ahead} planes of loads in flight beyond z+1; only plane z is stored in the one "
           f"shared plane of the block ({tile_x} x {rows} cells), for the x-y neighbours. At the start of each "
           f"step the slot of plane z-2, which nobody needs any more, receives the request for plane "
           f"z+{ring - 2}, so the ring turns without moving a register.")
    c = Canvas.titled(510, alt, "Lab 6: z neighbours in registers, one shared plane")
    c.text(24, 46, f"one thread's ring of {ring} float4 registers: AHEAD = {ahead} planes of loads in flight "
                   f"beyond z+1 (the starter's AHEAD: {starter_ahead})", size=12, fill=MUTED)

    def role(j: int) -> tuple[str, str]:
        if j == -1:
            return SKY, "z-1: read as zm"
        if j == 0:
            return GREEN, "z: stored to the plane"
        if j == 1:
            return ORANGE, "z+1: read as zp"
        return tint(PURPLE, 0.55), f"z+{j}: in flight"

    colw, x0, y0, h = 200, 24, 78, 34
    for step in range(3):
        x = x0 + step * colw
        c.text(x + 85, y0 - 8, f"step z = zb+{step}" if step else "step z = zb", size=12, anchor="middle",
               weight="bold")
        for slot in range(ring):
            j = (slot - step) % ring - 1                # slot of plane z+j at this step: (step + 1 + j) % ring
            fill, label = role(j)
            y = y0 + slot * (h + 6)
            newest = j == ring - 2
            c.rect(x, y, 170, h, fill=tint(fill, 0.15) if not newest else tint(PURPLE, 0.85), stroke=INK,
                   sw=0.8, rx=3, dash="4,2" if j >= 2 else None)
            c.text(x + 8, y + 14, f"q[{slot}]", size=11, fill=MUTED, family=MONO)
            c.text(x + 8, y + 28, f"z+{j}: requested now" if newest else label, size=11)
    c.text(x0, y0 + ring * (h + 6) + 12, f"the slot of plane z is (step + 1) % {ring}, a constant in each of the "
                                         f"{ring} unrolled", size=12)
    c.text(x0, y0 + ring * (h + 6) + 28, "steps of the z loop: the ring turns, and no register is ever copied",
           size=12)
    # The one shared plane.
    px, py = 640, 78
    cw, ch = 1.5, 12
    c.text(px, py - 8, "the block's one shared plane", size=12, weight="bold")
    for r in range(rows):
        halo = r in (0, rows - 1)
        c.rect(px, py + r * ch, tile_x * cw, ch - 1, fill=tint(GREEN, 0.55) if not halo else tint(GREEN, 0.85))
    c.rect(px - 4, py + ch, 3, (rows - 2) * ch - 1, fill=VERMILION)
    c.rect(px + tile_x * cw + 1, py + ch, 3, (rows - 2) * ch - 1, fill=VERMILION)
    c.rect(px - 5, py - 1, tile_x * cw + 10, rows * ch + 1, stroke=INK, sw=1)
    bottom = py + rows * ch
    c.text(px, bottom + 18, f"{block_x} x {rows} threads, one float4", size=11)
    c.text(px, bottom + 33, f"each: a {tile_x} x {out_rows} tile plus", size=11)
    c.text(px, bottom + 48, "a halo row above and below", size=11)
    c.text(px, bottom + 63, "(paler rows: they load only)", size=11, fill=MUTED)
    c.text(px, bottom + 84, "red: the x-halo cells", size=11, fill=VERMILION)
    # Each step.
    sy = 384
    c.text(24, sy, "each step, in every thread:", size=13, weight="bold")
    steps = ["store q[z] in the plane", f"request plane z+{ring - 2}", "__syncthreads()", "compute plane z",
             "__syncthreads()"]
    x = 24
    for i, text in enumerate(steps):
        w = len(text) * 6.6 + 20
        fill = tint(GREY, 0.7) if "sync" in text else tint(SKY, 0.7) if i == 1 else tint(GREEN, 0.7)
        c.rect(x, sy + 12, w, 26, fill=fill, rx=4)
        c.text(x + w / 2, sy + 30, text, size=11, anchor="middle")
        x += w + 14
        if i < len(steps) - 1:
            c.arrow(x - 13, sy + 25, x - 2, sy + 25, sw=1, head=5)
    c.text(24, sy + 62, "compute: the x and y neighbours from the plane, z-1 and z+1 from the thread's own "
                        "registers.", size=12)
    c.text(24, sy + 80, "Two barriers per plane: a thread may overwrite the plane only after everyone has read "
                        "it,", size=12, fill=MUTED)
    c.text(24, sy + 96, "and read it only after everyone has stored it. A load in flight holds its register "
                        "until its plane is used.", size=12, fill=MUTED)
    return c
