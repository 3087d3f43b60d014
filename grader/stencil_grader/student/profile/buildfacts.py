"""What the build says of each of the student's kernels, read from ptxas.log, the linked bench
program's machine code (grading/sass.py) and kernel.ptx.

Per kernel: registers, static shared memory, spills (ptxas.log, the last architecture it lists);
integer divisions and remainders and how many sit in a loop, the widest global load and store
(the SASS of that architecture); how the lanes of a warp address memory (access.py, kernel.ptx).
Both modes of the profile use these facts; they are stored in profile-inputs.json.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...grading import build as grading_build
from ...grading import names, sass
from . import access
from . import ptxtext as ptx
from .common import EXIT_CANNOT, EXIT_FAILED, ProfileError


def static_facts(build_dir: Path) -> dict[str, dict]:
    """Per student kernel (mangled name): what the build says of it.

    From BUILD_DIR/ptxas.log (the last architecture it lists): registers per thread, static shared
    memory per block (bytes), spill stores and loads and stack frame (bytes per thread).  From the
    SASS of that architecture in BUILD_DIR/bench (the device functions the kernel calls included):
    div_rem (integer divisions or remainders, sass.integer_divisions), div_rem_in_loop (those inside
    a loop), widest_load and widest_store (bytes per thread of its widest global access, 0 when it
    has none).  From BUILD_DIR/kernel.ptx: accesses.  label: the name people read ('sweep<4>').
    Raises ProfileError when the build holds no kernel of the student's, or (EXIT_CANNOT) when its
    machine code cannot be read.
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
    try:
        code = sass.student_code(build_dir)
    except sass.SassError as err:
        raise ProfileError(str(err), EXIT_CANNOT) from err
    for name, fact in facts.items():
        if fn := code.get(int(re.sub(r"\D", "", fact["arch"] or "") or 0), {}).get(name):
            divisions = [o for o, _ in sass.integer_divisions(fn)]
            fact.update(div_rem=len(divisions), div_rem_in_loop=len(sass.in_loops(fn, divisions)),
                        widest_load=sass.widest_global_load(fn), widest_store=sass.widest_global_load(fn, ("STG",)))
    ptx_path = Path(build_dir) / "kernel.ptx"
    if ptx_path.is_file():
        accesses = access.kernel_accesses(ptx.parse_ptx(ptx_path.read_text(errors="replace")))
        for name, fact in facts.items():
            fact["accesses"] = accesses.get(name, [])
    return facts
