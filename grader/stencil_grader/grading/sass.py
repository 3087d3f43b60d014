"""The machine code that ran: the SASS of the student's file inside the linked `bench` program, on
which every lab rule on code is judged (never a second compile, nor kernel.ptx's text; grader/README.md,
section 6, says why).

`cuobjdump -sass BUILD_DIR/bench` lists each ELF of the program's fat binaries: its architecture,
the file it was compiled from (`identifier =`: the harness's are under grader/harness/ and left
out) and each kernel's instructions, the device functions it calls included.  A launched kernel is
matched by the mangled name CUPTI gave the audit to the function of that name in the ELF the GPU
loads (for_device); one that is missing, or that two ELFs of that architecture define, fails.  A
program without an ELF for the GPU ran code the driver compiled from its PTX: the grader compiles
the same PTX with the toolkit's ptxas (the driver JIT's compiler) and judges that; where ptxas
cannot, the rules that need machine code say "not verified", never pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpus
from ..base.labspec import LabSpec
from ..base.toolkit import find_nvcc
from .checks import MAX_REPORTED, StaticCheck
from .names import kernel_label

DISASSEMBLE_TIMEOUT_S = 120.0
#: The harness's CUDA files (device.cu, kinds/*.cu): their ELFs are not the student's.
HARNESS = KIT_ROOT / "grader" / "harness"

_ARCH = re.compile(r"^arch = sm_(\d+)[a-z]?\s*$")
_IDENTIFIER = re.compile(r"^identifier = (.*?)\s*$")
_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
                          r"([^;]*);")


class SassError(RuntimeError):
    """The grader could not disassemble a program it built (its own machinery's failure)."""


@dataclass
class SassFunction:
    """One kernel of one architecture: its mangled name, architecture (90 for sm_90), instructions
    as (offset, opcode with modifiers, operands), and how many ELFs of that architecture define it
    (more than one: which the driver loads is not known, and the instructions are those of all),
    and whether ptxas compiled it from the program's PTX (the driver's JIT: module docstring)."""

    name: str
    arch: int
    instructions: list[tuple[int, str, str]] = field(default_factory=list)
    copies: int = 1
    from_ptx: bool = False

    def where(self, offset: int) -> str:
        return f"{kernel_label(self.name)}, sm_{self.arch} offset 0x{offset:04x}"


def _ours(identifier: str, harness: Path) -> bool:
    """Whether an ELF compiled from `identifier` is the student's: not a file under `harness`."""
    return Path(os.path.abspath(harness)) not in Path(os.path.abspath(identifier)).parents


def parse_sass(text: str, harness: Path = HARNESS) -> dict[int, dict[str, SassFunction]]:
    """The student's kernels in `cuobjdump -sass` text: {architecture: {mangled name:
    SassFunction}}.  ELFs compiled from a file under `harness` are left out."""
    code: dict[int, dict[str, SassFunction]] = {}
    arch, ours, fn = 0, True, None
    for line in text.splitlines():
        if line.startswith("Fatbin "):
            arch, ours, fn = 0, True, None
        elif m := _ARCH.match(line):
            arch = int(m.group(1))
        elif m := _IDENTIFIER.match(line):
            ours = _ours(m.group(1), harness)
        elif ours and (m := _FUNCTION.match(line)):
            if fn := code.setdefault(arch, {}).get(m.group(1)):
                fn.copies += 1
            else:
                fn = code[arch][m.group(1)] = SassFunction(m.group(1), arch)
        elif fn is not None and (m := _INSTRUCTION.match(line)):
            fn.instructions.append((int(m.group(1), 16), m.group(2), m.group(3).strip()))
    return code


def cuobjdump() -> str | None:
    """CUOBJDUMP when set, else the toolkit's cuobjdump (beside the nvcc that builds), else the one
    on PATH."""
    if os.environ.get("CUOBJDUMP"):
        return os.environ["CUOBJDUMP"]
    nvcc = find_nvcc()
    beside = Path(nvcc).parent / "cuobjdump" if nvcc else None
    return str(beside) if beside and beside.is_file() else shutil.which("cuobjdump")


def _run(argv: list[str]) -> str:
    """argv's output; its own folder first on PATH, so that cuobjdump runs the nvdisasm of its
    own toolkit (another release's may not know the architecture)."""
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(argv[0]).parent), os.environ.get("PATH", "")]))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env,
                              timeout=DISASSEMBLE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SassError(f"{' '.join(argv)}: {err}") from err
    if done.returncode != 0:
        raise SassError(f"{' '.join(argv)} failed: {done.stderr.strip()[:300]}")
    return done.stdout


_PTX_BODY = re.compile(r"^\s*(//|\.version\b)")


def parse_ptx_sections(text: str, harness: Path = HARNESS) -> list[tuple[int, str]]:
    """The student's PTX in `cuobjdump -ptx` text: (target architecture, PTX text) per section, the
    harness's left out (parse_sass's rule)."""
    sections: list[tuple[int, bool, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("Fatbin "):
            sections.append((0, True, []))
        elif not sections:
            continue
        elif sections[-1][2] or _PTX_BODY.match(line):
            sections[-1][2].append(line)
        elif m := _ARCH.match(line):
            sections[-1] = (int(m.group(1)), sections[-1][1], [])
        elif m := _IDENTIFIER.match(line):
            sections[-1] = (sections[-1][0], _ours(m.group(1), harness), [])
    return [(arch, "\n".join(body) + "\n") for arch, ours, body in sections if ours and body]


def _jit(tool: str, binary: Path, want: int | None) -> dict[str, SassFunction]:
    """The student's kernels compiled by ptxas from the program's PTX for sm_`want` (None: this
    machine's GPU, else the newest PTX target itself), as the driver does at load time; empty when
    the program holds no PTX the GPU can run or the toolkit's ptxas does not know sm_`want`.
    Raises SassError when ptxas is missing (the toolkit's)."""
    sections = parse_ptx_sections(_run([tool, "-ptx", str(binary)]))
    if want is None and (gpu := gpus.visible_gpu()):
        want = gpus.arch(gpu.compute_cap)
    targets = [a for a, _ in sections if want is None or a <= want]
    if not targets:
        return {}
    nvcc = find_nvcc()
    ptxas = Path(nvcc).parent / "ptxas" if nvcc else None
    if ptxas is None or not ptxas.is_file():
        raise SassError("ptxas, which ships with the CUDA toolkit, was not found beside nvcc: the program holds "
                        "PTX alone for this GPU, whose machine code the grader compiles as the driver does")
    arch = want or max(targets)
    found: dict[str, SassFunction] = {}
    with tempfile.TemporaryDirectory(prefix="stencil-jit-") as tmp:
        for i, (_, ptx) in enumerate(s for s in sections if s[0] == max(targets)):
            source, cubin = Path(tmp) / f"{i}.ptx", Path(tmp) / f"{i}.cubin"
            source.write_text(ptx)
            try:
                _run([str(ptxas), f"-arch=sm_{arch}", "-o", str(cubin), str(source)])
            except SassError:
                return {}
            for name, fn in parse_sass(f"arch = sm_{arch}\n" + _run([tool, "-sass", str(cubin)])).get(arch, {}).items():
                fn.from_ptx = True
                if name in found:
                    found[name].copies += 1
                else:
                    found[name] = fn
    return found


def student_code(build_dir: Path, cc: str | None = None,
                 program: str = "bench") -> dict[int, dict[str, SassFunction]]:
    """The SASS of the student's file in BUILD_DIR/<program> (parse_sass: "bench", or "check" when the
    timed run ran inside the check program: the program that ran), and, where the program holds
    no ELF that a GPU of compute capability `cc` ("9.0") loads, or no ELF at all (cc None), the
    machine code compiled from its PTX as the driver would (module docstring).  Raises SassError
    when cuobjdump or ptxas is missing or cuobjdump fails: the grader's machinery, never the
    student's fault."""
    tool = cuobjdump()
    if tool is None:
        raise SassError("cuobjdump, which ships with the CUDA toolkit, was not found beside nvcc or on PATH: "
                        "the lab's rules on code are judged on the program's machine code")
    binary = Path(build_dir) / program
    code = parse_sass(_run([tool, "-sass", str(binary)]))
    want = gpus.arch(cc)
    if not any(gpus.elf_runs_on(a, want) for a in code) if want else not code:
        if jitted := _jit(tool, binary, want):
            code[next(iter(jitted.values())).arch] = jitted
    return code


def for_device(code: dict[int, dict[str, SassFunction]], cc: str | None) -> tuple[dict[str, SassFunction], str]:
    """(the kernels the driver loads on a GPU of compute capability `cc` ("9.0"), which ELF):
    the ELF of that architecture, else the newest of the same major version below it (binary
    compatible).  Empty, with why, when there is none: the driver compiled PTX then."""
    want = gpus.arch(cc)
    if want is None:
        return {}, f"the GPU's compute capability is not known ({cc!r})"
    usable = [a for a in code if gpus.elf_runs_on(a, want)]
    if not usable:
        return {}, (f"the program holds no machine code of kernel.cu for sm_{want} (it has "
                    f"{', '.join(f'sm_{a}' for a in sorted(code)) or 'none'}), and the toolkit's ptxas could not "
                    "compile its PTX for that GPU as the driver did: build for your GPU (CUDA_ARCH=" f"{want})")
    chosen = code[max(usable)]
    jit = any(fn.from_ptx for fn in chosen.values())
    return chosen, f"sm_{max(usable)}" + (", compiled by ptxas from the program's PTX as the driver did" if jit else "")


def _parts(opcode: str) -> list[str]:
    return opcode.upper().split(".")


def integer_divisions(fn: SassFunction) -> list[tuple[int, str]]:
    """(offset, opcode) of each integer division or remainder: `I2F...RP` (the divisor converted
    rounding up) starts every one nvcc and ptxas emit for a divisor not known at compile time (32-
    and 64-bit, inline PTX div/rem included); a constant divisor becomes a multiply."""
    return [(o, op) for o, op, _ in fn.instructions if _parts(op)[0] == "I2F" and "RP" in _parts(op)]


_SHARED_READS = {"LDS", "LDSM", "ATOMS", "LD"}
_SHARED_ANY = _SHARED_READS | {"STS", "LDGSTS", "STSM"}


def reads_shared(fn: SassFunction) -> bool:
    """Whether the kernel reads shared memory: LDS, LDSM, ATOMS, or a generic LD (which may)."""
    return any(_parts(op)[0] in _SHARED_READS for _, op, _ in fn.instructions)


def uses_shared(fn: SassFunction) -> bool:
    return any(_parts(op)[0] in _SHARED_ANY for _, op, _ in fn.instructions)


_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16, "256": 32}


def widest_global_load(fn: SassFunction, opcodes: tuple[str, ...] = ("LDG", "LDGSTS")) -> int:
    """Bytes of the widest global load one thread makes (LDG, LDGSTS; a store with ("STG",));
    0 when it makes none."""
    return max((next((_WIDTHS[p] for p in _parts(op) if p in _WIDTHS), 4)
                for _, op, _ in fn.instructions if _parts(op)[0] in opcodes), default=0)


_BRANCH_TARGET = re.compile(r"(?:^|,)\s*0x([0-9a-f]+)\s*$")


def in_loops(fn: SassFunction, offsets: list[int]) -> list[int]:
    """Those of `offsets` inside a loop: between a BRA and the earlier offset it branches back to
    (nvcc lays out every loop so: for, while, grid-stride)."""
    loops = [(int(m.group(1), 16), o) for o, op, args in fn.instructions
             if _parts(op)[0] == "BRA" and (m := _BRANCH_TARGET.search(args)) and int(m.group(1), 16) < o]
    return [x for x in offsets if any(start <= x <= end for start, end in loops)]


_NARROW_MEMORY = {"LDG", "STG", "LD", "ST", "ATOMG", "ATOM", "RED", "REDG"}
_NARROW_FLOATS = {"F16", "BF16", "F16X2", "BF16X2", "E4M3", "E5M2", "E2M1", "E2M3", "E3M2", "UE8M0"}


def narrow_accesses(fn: SassFunction) -> list[tuple[int, str]]:
    """(offset, opcode) of each access narrower than fp32: 8- and 16-bit global or generic loads,
    stores and atomics, and conversions to or from half and 8-bit floats (F2F so typed, any F2FP)."""
    found = []
    for offset, op, _ in fn.instructions:
        parts = _parts(op)
        if parts[0] in _NARROW_MEMORY and {"U8", "S8", "U16", "S16"} & set(parts) or parts[0] == "F2FP" \
                or parts[0] == "F2F" and _NARROW_FLOATS & set(parts):
            found.append((offset, op))
    return found


_ATOMICS = {"RED", "REDG", "ATOM", "ATOMG", "ATOMS", "REDAS"}
_FLOAT_TYPES = {"F32", "F64", "F16X2", "BF16X2", "F16", "BF16"}


def float_atomics(fn: SassFunction) -> list[tuple[int, str]]:
    """(offset, opcode) of each floating-point atomic (RED, ATOM, ATOMG, ATOMS on F32, F64, F16x2,
    BF16x2) or compare-and-swap (CAS, CAST), which adds floats in any order too."""
    return [(o, op) for o, op, _ in fn.instructions
            if _parts(op)[0] in _ATOMICS and (_FLOAT_TYPES | {"CAS", "CAST"}) & set(_parts(op))]


def check_machine_code(spec: LabSpec, build_dir: Path) -> list[StaticCheck]:
    """The static stage's rules on the student's machine code, every architecture the program
    holds: no integer div/rem (severity "constraint") and the shared-memory signal (a first look
    that costs nothing: the launch audit judges the tile).  None when lab.json asks for neither."""
    c = spec.constraints
    if not (c.no_div_rem or c.shared_memory):
        return []
    code = student_code(build_dir)
    kernels = [fn for functions in code.values() for fn in functions.values()]
    checks = []
    if c.no_div_rem:
        found = [f"{fn.where(o)}: {op}" for fn in kernels for o, op in integer_divisions(fn)]
        if not kernels:
            checks.append(StaticCheck("no div/rem", "fail", "constraint",
                                      "the program holds no machine code of kernel.cu, nor PTX that the toolkit's "
                                      "ptxas compiles: this rule is judged on machine code; build for your GPU "
                                      "(CUDA_ARCH=90, say)"))
        elif found:
            checks.append(StaticCheck("no div/rem", "fail", "constraint",
                                      f"{len(found)} integer division(s) or remainder(s) in the machine code of "
                                      "your kernels (from / or % on integers, or div/rem in inline PTX, with a "
                                      "divisor known only at run time); this lab asks for none: performance "
                                      "gets 0", found[:MAX_REPORTED]))
        else:
            checks.append(StaticCheck("no div/rem", "pass", "constraint",
                                      "no integer division or remainder in the machine code of your kernels"))
    if c.shared_memory:
        users = sorted({kernel_label(fn.name) for fn in kernels if uses_shared(fn)})
        checks.append(StaticCheck("shared memory", "pass" if users else "fail", "signal",
                                  "shared memory used (the launch audit judges the tile on the kernels your "
                                  "launcher starts)" if users else
                                  "no kernel touches shared memory (__shared__): this lab asks every kernel your "
                                  "launcher starts to stage its tile in shared memory, which the launch audit "
                                  "will find missing (performance 0)", [f"kernel {u}" for u in users]))
    return checks
