"""How the lanes of a warp address memory, from BUILD_DIR/kernel.ptx: a diagnosis, never a judge (the
lab's rules read the machine code, grading/sass.py).  Each global and shared access's stride by threadIdx
(grader/README.md, section 8) follows registers through mov, cvt, cvta, add, sub, mul, mad, shl and neg
(a loop-carried register keeps a stride when every assignment gives the same one); anything else is left
out, never guessed.  blockDim comes from the audited launch (stride_bytes); a kernel parameter stays
symbolic.  The strides are stored in the profile's inputs: `--from-inputs` needs no PTX.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+"
                          r"(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")


@dataclass
class PtxFunction:
    name: str
    kind: str                                   # "entry" (a kernel) or "func" (a device function)
    lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text without comment)


def parse_ptx(text: str) -> list[PtxFunction]:
    """The functions of PTX text, each with its body's lines; a prototype (`.extern .func ...;`)
    has no body and is none."""
    functions: list[PtxFunction] = []
    pending: PtxFunction | None = None
    current: PtxFunction | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("//", 1)[0]
        if depth == 0:
            if m := _FUNC_HEADER.match(stripped):
                pending = PtxFunction(m.group(2), m.group(1))
            if pending and "{" in stripped:
                current, pending = pending, None
                functions.append(current)
            elif pending and stripped.rstrip().endswith(";"):
                pending = None
        elif current:
            current.lines.append((number, stripped))
        depth += stripped.count("{") - stripped.count("}")
        if depth <= 0:
            depth, current = 0, None
    return functions


Poly = dict  # {(atom, ...): coefficient}: a sum of products of atoms, () the constant term

_SPECIAL = re.compile(r"^%(tid|ntid|ctaid|nctaid)\.([xyz])$")
_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)\s+(.*?);?\s*$")
_OPERAND_COMMA = re.compile(r",(?![^{\[]*[}\]])")      # not inside {...} or [...], which PTX does not nest
_REG = re.compile(r"^%[\w$]+$")
_INT = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)$")
_ADDRESS = re.compile(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\d+))?\s*\]")
_MEMORY = re.compile(r"^(ld|st)\.(global|shared)\b")
_BITS = re.compile(r"\.[bfsu](\d+)$")
_VEC = re.compile(r"\.v(\d)\b")
MAX_DEGREE = 4
MAX_PASSES = 8


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    return {k: v for k in a.keys() | b.keys() if (v := a.get(k, 0) + sign * b.get(k, 0))}


def _mul(a: Poly, b: Poly) -> Poly | None:
    """a * b, or None past MAX_DEGREE."""
    out: Poly = {}
    for (ka, va), (kb, vb) in itertools.product(a.items(), b.items()):
        if len(key := tuple(sorted(ka + kb))) > MAX_DEGREE:
            return None
        out[key] = out.get(key, 0) + va * vb
    return {k: v for k, v in out.items() if v}


def _const(n: int) -> Poly:
    return {(): n} if n else {}


#: The arithmetic followed exactly: opcode -> (its operands, their result); never a .hi form.
_ARITHMETIC = {"add": (2, _add), "sub": (2, lambda a, b: _add(a, b, -1)), "neg": (1, lambda a: _add({}, a, -1)),
               "mul": (2, _mul), "mad": (3, lambda a, b, c: None if (ab := _mul(a, b)) is None else _add(ab, c))}


@dataclass(frozen=True)
class Value:
    """A register: its value (None: not a polynomial of known atoms) and its derivative by
    threadIdx.x and .y (None: unknown), each a Poly, never changed once made."""

    poly: Poly | None
    dx: Poly | None
    dy: Poly | None


class _Analysis:
    """The symbolic evaluation of one function body (module docstring)."""

    def __init__(self, fn: PtxFunction):
        self.fn = fn
        self.instructions = []               # (line number, opcode, operands)
        for number, text in fn.lines:
            m = _INSTR.match(text)
            if m and not m.group(1).startswith(".") and ":" not in m.group(1):
                args = [o.strip() for o in _OPERAND_COMMA.split(m.group(2))]
                self.instructions.append((number, m.group(1), args[:-1] if args and not args[-1] else args))
        self.atoms: dict[str, tuple] = {}    # atom -> (dx, dy) as polys (None: unknown)
        self.state: dict[str, Value] = {}

    # -- atoms and derivatives
    def _atom(self, name: str, dx: Poly | None, dy: Poly | None) -> Value:
        self.atoms[name] = (dx, dy)
        return Value({(name,): 1}, dx, dy)

    def derivative(self, poly: Poly, axis: int) -> Poly | None:
        total: Poly = {}
        for key, coef in poly.items():
            for i, atom in enumerate(key):
                d = self.atoms[atom][axis] if atom in self.atoms else {}
                if d is None:
                    return None
                rest = _mul({key[:i] + key[i + 1:]: coef}, d)
                if rest is None:
                    return None
                total = _add(total, rest)
        return total

    def operand(self, text: str) -> Value | None:
        """The value of an operand: a register's state, an integer, a special register."""
        if _INT.match(text):
            return Value(_const(int(text, 0)), {}, {})
        if m := _SPECIAL.match(text):
            kind, axis = m.groups()
            if kind == "tid":
                return self._atom(f"tid.{axis}", _const(1 if axis == "x" else 0), _const(1 if axis == "y" else 0))
            return self._atom(f"{kind}.{axis}", {}, {})
        if text == "%laneid":
            return self._atom("laneid", _const(1), {})
        if _REG.match(text):
            return self.state.get(text)
        if re.match(r"^[A-Za-z_$][\w$]*$", text):              # a variable's address (shared memory)
            return self._atom(f"&{text}", {}, {})
        return Value(None, None, None)

    def opaque(self, name: str, inputs: list[Value]) -> Value:
        """A result that is no polynomial: uniform when every input is, unknown otherwise."""
        uniform = all(v.dx == {} and v.dy == {} for v in inputs)
        return self._atom(name, {} if uniform else None, {} if uniform else None)

    def evaluate(self, number: int, op: str, args: list[str]) -> Value | None:
        base = op.split(".")[0]
        srcs = args[1:]
        if base in ("ld", "st", "atom", "red", "cp", "bar", "membar", "fence", "bra", "ret", "setp", "call",
                    "shfl", "vote", "exit", "trap", "prefetch"):
            if base == "ld" and ".param" in op:
                return self._atom(f"param:{args[1].strip('[]')}", {}, {})
            if base in ("ld", "shfl", "atom"):
                addr = _ADDRESS.search(args[1]) if len(args) > 1 else None
                inputs = [self.operand(addr.group(1))] if addr else []
                if None in inputs:
                    return None
                return self.opaque(f"ld@{number}", inputs + ([] if op.startswith("ld") else [Value(None, None, None)]))
            return None
        values = [self.operand(s) for s in srcs]
        if any(v is None for v in values):
            return None                                          # defined later (a loop): next pass
        polys = [v.poly for v in values]
        result: Poly | None = None
        if base in ("mov", "cvt", "cvta") and len(values) == 1:
            return values[0]
        arity, rule = _ARITHMETIC.get(base, (0, None))
        if rule and ".hi" not in op and len(polys) == arity and None not in polys:
            result = rule(*polys)
        elif base == "shl" and len(polys) == 2 and polys[0] is not None and _INT.match(srcs[1]):
            result = _mul(polys[0], _const(1 << int(srcs[1], 0)))
        elif base in ("selp", "min", "max") and values:
            picks = values[:2]
            same = picks[0].dx == picks[1].dx and picks[0].dy == picks[1].dy
            return self._atom(f"sel@{number}", picks[0].dx if same else None, picks[0].dy if same else None)
        if result is None:
            return self.opaque(f"op@{number}", values)
        return Value(result, self.derivative(result, 0), self.derivative(result, 1))

    def run(self) -> None:
        defs: dict[str, list[int]] = {}
        for i, (_, op, args) in enumerate(self.instructions):
            if args and _REG.match(args[0]) and not op.startswith(("st", "bra", "setp", "bar", "red")):
                defs.setdefault(args[0], []).append(i)
        for _ in range(MAX_PASSES):
            results = {i: self.evaluate(*self.instructions[i][:2], self.instructions[i][2])
                       for ids in defs.values() for i in ids}
            changed = False
            for reg, ids in defs.items():
                got = [results[i] for i in ids if results[i] is not None]
                if not got:
                    continue
                if len(ids) == 1:
                    new = got[0]
                else:                                             # assigned several times: one atom
                    dx = got[0].dx if all(v.dx == got[0].dx for v in got) else None
                    dy = got[0].dy if all(v.dy == got[0].dy for v in got) else None
                    new = self._atom(f"phi:{reg}", dx, dy)
                if self.state.get(reg) != new:
                    self.state[reg], changed = new, True
            if not changed:
                break

    def accesses(self) -> list[dict]:
        """Every global and shared load and store: space, op, width (bytes per lane), line, and
        the strides by threadIdx.x and .y as polynomials (lists of [atoms, coefficient]; None:
        unknown)."""
        found = []
        for number, op, args in self.instructions:
            m = _MEMORY.match(op)
            if not m:
                continue
            if not (addr := _ADDRESS.search(args[1] if m.group(1) == "ld" else args[0])):
                continue
            base = self.operand(addr.group(1)) or Value(None, None, None)
            vec, bits = _VEC.search(op), _BITS.search(op)
            found.append({"space": m.group(2), "op": "load" if m.group(1) == "ld" else "store",
                          "width": (int(vec.group(1)) if vec else 1) * (int(bits.group(1)) // 8 if bits else 4),
                          "line": number, "stride_x": _listed(base.dx), "stride_y": _listed(base.dy)})
        return found


def _listed(poly: Poly | None) -> list | None:
    return None if poly is None else [[list(k), v] for k, v in sorted(poly.items())]


def kernel_accesses(functions: list[PtxFunction]) -> dict[str, list[dict]]:
    """Per kernel (mangled name): its accesses (_Analysis.accesses)."""
    out = {}
    for fn in functions:
        if fn.kind == "entry":
            analysis = _Analysis(fn)
            analysis.run()
            out[fn.name] = analysis.accesses()
    return out


# ---------------------------------------------------------------- what a warp does

def stride_bytes(stride: list | None, block: list[int], grid: list[int]) -> int | str | None:
    """A stride's value in bytes with blockDim and gridDim filled in: an int; "runtime" when it
    still holds a symbol (a parameter such as nx); None when unknown."""
    if stride is None:
        return None
    known = {f"ntid.{a}": n for a, n in zip("xyz", block)} | {f"nctaid.{a}": n for a, n in zip("xyz", grid)}
    total, symbolic = 0, False
    for atoms, coef in stride:
        value = coef
        for atom in atoms:
            if atom in known:
                value *= known[atom]
            else:
                symbolic = True
        if not symbolic:
            total += value
    return "runtime" if symbolic else total


def lane_offsets(sx: int, sy: int, block_x: int, lanes: int = 32) -> list[int]:
    """Byte offsets of a warp's lanes: lane i is threadIdx (i % blockDim.x, i // blockDim.x)."""
    bx = max(1, block_x)
    return [(i % bx) * sx + (i // bx) * sy for i in range(lanes)]


def global_sectors(offsets: list[int], width: int) -> int:
    """32-byte sectors a warp's request touches (each lane `width` bytes at its offset)."""
    return len({(o + k) // 32 for o in offsets for k in range(0, width, 4)})


def shared_wavefronts(offsets: list[int], width: int) -> tuple[int, int]:
    """(wavefronts, ideal) of a warp's shared access: lanes are served 128 bytes at a time
    (phases of 128 / width lanes); within a phase, each bank serves one 4-byte word per
    wavefront (the same word to many lanes is one broadcast)."""
    per_phase = max(1, 128 // max(4, width))
    fronts = 0
    for start in range(0, len(offsets), per_phase):
        words: dict[int, set] = {}
        for o in offsets[start:start + per_phase]:
            for k in range(0, max(4, width), 4):
                word = (o + k) // 4
                words.setdefault(word % 32, set()).add(word)
        fronts += max(len(w) for w in words.values())
    return fronts, -(-len(offsets) // per_phase)
