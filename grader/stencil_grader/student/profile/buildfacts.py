"""What the build says of each of the student's kernels, read from ptxas.log and kernel.ptx.

Per kernel: registers, static shared memory, spills (ptxas.log, the last architecture it lists);
integer div/rem instructions and how many sit in a loop, the widest global load and store, and
how the lanes of a warp address memory (access.py) (kernel.ptx).  Both modes of the profile use
these facts; they are stored in profile-inputs.json.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...grading import build as grading_build
from ...grading import names
from . import access
from . import ptxtext as ptx
from .common import EXIT_FAILED, ProfileError

_STORE = re.compile(r"^\s*(?:@!?%?\w+\s+)?(st\.[\w.:]*)")
_VEC = re.compile(r"^v(\d+)$")
_TYPE_BITS = re.compile(r"^[bfsu](\d+)$")


def global_store_bytes(line: str) -> int:
    """Bytes one global store instruction of a PTX line moves per thread (0 when it is not one):
    st.global.v4.f32 -> 16, st.global.f32 -> 4."""
    m = _STORE.match(line)
    if not m:
        return 0
    parts = m.group(1).split(".")
    if "global" not in parts:
        return 0
    count = next((int(v.group(1)) for p in parts if (v := _VEC.match(p))), 1)
    bits = next((int(t.group(1)) for p in reversed(parts) if (t := _TYPE_BITS.match(p))), 32)
    return count * bits // 8


def static_facts(build_dir: Path) -> dict[str, dict]:
    """Per student kernel (mangled name): what the build says of it.

    From BUILD_DIR/ptxas.log (the last architecture it lists): registers per thread, static shared
    memory per block (bytes), spill stores and loads and stack frame (bytes per thread).  From
    BUILD_DIR/kernel.ptx: div_rem (integer div/rem instructions in the kernel and the device
    functions it calls), widest_load and widest_store (bytes per thread of its widest global
    access, 0 when it has none).  label: the name people read ('sweep<4>').
    Raises ProfileError when the build holds no kernel of the student's.
    """
    log = Path(build_dir) / "ptxas.log"
    resources = grading_build.parse_ptxas_log(log.read_text(errors="replace")) if log.is_file() else []
    facts: dict[str, dict] = {}
    for k in resources:
        if k.entry:
            facts[k.name] = {"label": names.kernel_label(k.name), "arch": k.arch, "registers": k.registers,
                             "smem_bytes": k.smem_bytes, "spill_stores": k.spill_stores,
                             "spill_loads": k.spill_loads, "stack_bytes": k.stack_bytes,
                             "div_rem": 0, "div_rem_in_loop": 0, "widest_load": 0, "widest_store": 0,
                             "accesses": []}
    if not facts:
        raise ProfileError(f"{log} lists no kernel (__global__ function) of your file: there is nothing "
                           "to profile", EXIT_FAILED)
    ptx_path = Path(build_dir) / "kernel.ptx"
    if ptx_path.is_file():
        module = ptx.parse_ptx(ptx_path.read_text(errors="replace"))
        by_name = {f.name: f for f in module.functions}
        accesses = access.kernel_accesses(module)
        div_lines = {(fn, line) for _, fn, line in ptx.integer_div_rem(module)}
        for name, fact in facts.items():
            fn = by_name.get(name)
            if fn is None:
                continue
            reach = _reachable(fn, by_name)
            fact["div_rem"] = sum(1 for f, _ in div_lines if f in reach)
            fact["div_rem_in_loop"] = sum(len(in_loop(by_name[f], {n for g, n in div_lines if g == f}))
                                          for f in reach)
            fact["widest_load"] = max((ptx.global_load_bytes(t) for f in reach for _, t in by_name[f].lines),
                                      default=0)
            fact["widest_store"] = max((global_store_bytes(t) for f in reach for _, t in by_name[f].lines),
                                       default=0)
            fact["accesses"] = accesses.get(name, [])
    return facts


_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$%][\w$]*)")
_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$]*)\s*;")


def in_loop(fn, line_numbers: set[int]) -> set[int]:
    """Those of line_numbers (PTX line numbers in fn's body) that lie inside a loop: between a
    label and a later branch back to it.  nvcc lays out every loop so, whether it came from for,
    while or a grid-stride loop."""
    labels: dict[str, int] = {}
    back_edges = []                                   # (label line, branch line)
    for number, text in fn.lines:
        if m := _LABEL.match(text):
            labels[m.group(1)] = number
        elif (m := _BRANCH.search(text)) and m.group(1) in labels:
            back_edges.append((labels[m.group(1)], number))
    return {n for n in line_numbers if any(start <= n <= end for start, end in back_edges)}


def _reachable(fn, by_name: dict) -> set[str]:
    """Names of fn and every function it calls, directly or not."""
    seen, todo = {fn.name}, [fn]
    while todo:
        for _, text in todo.pop().lines:
            for m in _CALL.finditer(text):
                if m.group(1) in by_name and m.group(1) not in seen:
                    seen.add(m.group(1))
                    todo.append(by_name[m.group(1)])
    return seen

