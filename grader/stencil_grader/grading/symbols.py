"""The symbol check ("linked symbols"): what the compiled student object links against, defines
and executes, read with binutils from BUILD_DIR/kernel.o.

`nm -P`: every undefined symbol must be on whitelist.py's list (plus lab.json
constraints.forbidden_calls forbidden on top), and every defined global C-linkage symbol must be a
launcher of the student API or a name nothing check and bench link with defines or uses (whitelist.py).
`objdump -dr`: no system-call instruction in host code; relocations name the host function that
uses each symbol.  `objdump -h` and nm: no code of the file's runs before main (static initializers,
constructors, IFUNC resolvers; nvcc's one registration of its fatbinary aside): a class grading's check
program makes its CUDA start before its GPU is free, beside another grading's timed run.  A finding names the symbol, demangled, its function and, where a lexical search
of the source finds it, the line.  grader/README.md, section 6 (threat model), says why.
"""

from __future__ import annotations

import platform
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import process
from ..base.toolkit import find_nvcc
from .checks import MAX_REPORTED, StaticCheck
from .names import TOOL_TIMEOUT_S, demangle, simplify
from .source import strip_source
from .whitelist import (_VERSION_SUFFIX, _WHY_BEFORE_MAIN, _WHY_SYSCALL, Taken, api_names, defined_reason,
                        forbidden_reason, taken_names)

# ---------------------------------------------------------------- reading the object

@dataclass
class Symbol:
    name: str
    kind: str              # nm's letter: U (undefined), w/v (weak undefined), T, D, B, W ...
    demangled: str = ""

    @property
    def shown(self) -> str:
        return simplify(self.demangled or self.name)


@dataclass
class ObjectListing:
    """What binutils said about one object; error: why it could not be read."""

    undefined: list[Symbol] = field(default_factory=list)
    defined: list[Symbol] = field(default_factory=list)
    users: dict[str, set[str]] = field(default_factory=dict)     # symbol -> host functions using it
    syscalls: list[tuple[str, str]] = field(default_factory=list)  # (instruction, function)
    before_main: list[str] = field(default_factory=list)           # what runs before main (section, symbol)
    error: str | None = None


def parse_nm(text: str) -> tuple[list[Symbol], list[Symbol]]:
    """(undefined, defined global) symbols from `nm -P` output ("name type [value [size]]")."""
    undefined, defined = [], []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or len(parts[1]) != 1:
            continue
        name, kind = parts[0], parts[1]
        if kind in "Uwv" and (kind == "U" or all(v.strip("0") == "" for v in parts[2:])):
            undefined.append(Symbol(name, kind))
        elif kind in "TDBRGSVWu":   # global (upper case), weak (W/V), unique (u)
            defined.append(Symbol(name, kind))
    return undefined, defined


_FUNC_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_RELOC = re.compile(r"\bR_[A-Z0-9_]+\s+([^\s+-]+)")
_SYSCALL = re.compile(r"^\s*[0-9a-f]+:\s+(syscall|sysenter|int\s+\$0x80|svc\s+#?0x[0-9a-f]+|svc\s+#\d+)\b")


def parse_objdump(text: str) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """(symbol -> functions whose code refers to it, [(system-call instruction, function)])
    from `objdump -dr -w --no-show-raw-insn` output."""
    users: dict[str, set[str]] = {}
    syscalls = []
    function = "?"
    for line in text.splitlines():
        if m := _FUNC_HEADER.match(line):
            function = m.group(1)
            continue
        for m in _RELOC.finditer(line):
            users.setdefault(m.group(1), set()).add(function)
        if m := _SYSCALL.match(line):
            syscalls.append((" ".join(m.group(1).split()), function))
    return users, syscalls


#: nvcc's constructor in every object it compiles: it registers the fatbinary with the CUDA runtime.
NVCC_REGISTRATION = "__sti____cudaRegisterAll"
#: Sections whose code or pointers run before main, besides .init_array (static linking: ld's script).
_BEFORE_MAIN = re.compile(r"^\.(preinit_array|init_array\.|ctors|init$)")
_SECTION = re.compile(r"^\s*\d+\s+(\S+)\s+([0-9a-f]+)\s")


def parse_before_main(headers: str, objdump: str, nm: str) -> list[str]:
    """What an object runs before main, from `objdump -h -w` (section headers), `objdump -d` (function
    names) and `nm -P`: each entry of .init_array past nvcc's one (8-byte pointers), every prioritised
    or legacy constructor section, every IFUNC symbol (nm's `i`: its resolver runs while the program
    loads)."""
    found, entries = [], 0
    for line in headers.splitlines():
        if not (m := _SECTION.match(line)):
            continue
        name, size = m.group(1), int(m.group(2), 16)
        if name == ".init_array":
            entries += size // 8
        elif _BEFORE_MAIN.match(name) and size:
            found.append(f"section {name}")
    allowed = 1 if re.search(rf"<[^>]*{NVCC_REGISTRATION}[^>]*>:", objdump) else 0
    if entries > allowed:
        found.append(f"{entries - allowed} static initializer(s) or constructor(s) in .init_array")
    found += [f"IFUNC {parts[0]}" for parts in map(str.split, nm.splitlines()) if len(parts) > 1 and parts[1] == "i"]
    return found


def read_object(obj: Path) -> ObjectListing:
    """nm and objdump of one object file; never raises (see ObjectListing.error)."""
    listing = ObjectListing()
    if missing := [tool for tool in ("nm", "objdump") if not shutil.which(tool)]:
        listing.error = f"{missing[0]} (binutils) is not installed"
        return listing
    out = {}
    for key, tool, options in (("nm", "nm", ["-P"]), ("objdump", "objdump", ["-dr", "-w", "--no-show-raw-insn"]),
                               ("headers", "objdump", ["-h", "-w"])):
        run = process.run([tool, *options, obj], TOOL_TIMEOUT_S)
        if run.returncode != 0:
            listing.error = f"{tool} {run.describe()}: {process.tail_lines(run.stderr, 3)}"
            return listing
        out[key] = run.stdout
    listing.undefined, listing.defined = parse_nm(out["nm"])
    listing.users, listing.syscalls = parse_objdump(out["objdump"])
    listing.before_main = parse_before_main(out["headers"], out["objdump"], out["nm"])
    names = {s.name for s in listing.undefined + listing.defined}
    names |= {f for fs in listing.users.values() for f in fs} | {f for _, f in listing.syscalls}
    table = demangle(sorted(names))
    for s in listing.undefined + listing.defined:
        s.demangled = table.get(s.name, s.name)
    listing.users = {k: {simplify(table.get(f, f)) for f in v} for k, v in listing.users.items()}
    listing.syscalls = [(insn, simplify(table.get(f, f))) for insn, f in listing.syscalls]
    return listing


# ---------------------------------------------------------------- source lines

#: Names a student writes for library classes whose symbols name their templates.
_ALIASES = {
    "basic_ofstream": ("ofstream", "wofstream"), "basic_ifstream": ("ifstream", "wifstream"),
    "basic_fstream": ("fstream",), "basic_filebuf": ("ofstream", "ifstream", "fstream", "filebuf"),
    "basic_ostream": ("cout", "cerr", "clog", "ostream", "endl", "ofstream", "ostringstream"),
    "basic_istream": ("cin", "istream", "ifstream"), "__ostream_insert": ("cout", "cerr", "ofstream"),
    "basic_streambuf": ("ofstream", "ifstream", "fstream", "streambuf"),
    "basic_ios": ("ofstream", "ifstream", "fstream", "ostringstream"), "ios_base": ("ofstream", "ifstream"),
    "__basic_file": ("ofstream", "ifstream", "fstream"), "locale": ("ofstream", "ifstream"),
    "basic_stringbuf": ("ostringstream", "istringstream", "stringstream"),
    "_Znwm": ("new",), "_Znam": ("new",), "_ZdlPv": ("delete",), "_ZdaPv": ("delete",),
    "_ZdlPvm": ("delete",), "_ZdaPvm": ("delete",),
}
_WORD = re.compile(r"[A-Za-z_]\w*")
_SKIP_WORDS = {"std", "char", "char_traits", "for", "vtable", "VTT", "typeinfo", "const", "unsigned",
               "long", "int", "void", "operator", "__cxx11", "allocator"}


def candidate_words(symbol: Symbol) -> list[str]:
    """Identifiers a source line that needs this symbol would contain, most specific first."""
    shown = simplify(symbol.demangled or symbol.name)
    words = [w for w in _WORD.findall(shown) if w not in _SKIP_WORDS]
    plain = _VERSION_SUFFIX.sub("", symbol.name)
    out = []
    for w in [plain] + list(reversed(words)):
        out.extend(_ALIASES.get(w, ()))
        out.append(w)
    return list(dict.fromkeys(out))


def source_lines(src: str, symbol: Symbol, max_lines: int = 3) -> list[int]:
    """Lines of src (comments and literals blanked) that name the symbol or a name it is known by."""
    bare = strip_source(src)[1]
    for word in candidate_words(symbol):
        pattern = re.compile(rf"(?<![\w]){re.escape(word)}(?!\w)")
        lines = sorted({bare.count("\n", 0, m.start()) + 1 for m in pattern.finditer(bare)})
        if lines:
            return lines[:max_lines]
    return []


_ASM_TEXT = re.compile(r"\b(svc\b)" if platform.machine().lower() in ("aarch64", "arm64")
                       else r"\b(syscall|sysenter|int\s*\$?0x80)")


def syscall_lines(src: str) -> list[int]:
    """Lines whose code or string literals spell a system-call instruction (inline assembly)."""
    code = strip_source(src)[0]
    return sorted({code.count("\n", 0, m.start()) + 1 for m in _ASM_TEXT.finditer(code)})


# ---------------------------------------------------------------- host-side inline assembly

_ASM_KEYWORD = re.compile(r"(?<!\w)(asm|__asm__|__asm)(?!\w)")
_LINE_MARKER = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')


def host_asm_lines(translation: str, source: Path) -> list[int]:
    """Lines of source holding an asm statement or label in nvcc's host-side translation
    (`nvcc -cuda` output, where device code is already removed)."""
    lines, current, number = [], None, 0
    target = str(Path(source).resolve())
    for text in translation.splitlines():
        if m := _LINE_MARKER.match(text):
            number, current = int(m.group(1)), m.group(2)
            continue
        if current is not None and (current == target or Path(current).name == source.name
                                    and Path(current).resolve() == Path(target)) and _ASM_KEYWORD.search(text):
            lines.append(number)
        number += 1
    return sorted(set(lines))


def check_host_asm(source: Path, src: str) -> tuple[list[int] | None, str]:
    """(lines with host-side inline assembly, or None when it could not be checked; a note).  Only a
    file whose code names asm is translated (nvcc -cuda, about 2 s, which removes device code)."""
    if not _ASM_KEYWORD.search(strip_source(src)[1]):
        return [], ""
    nvcc = find_nvcc()
    if not nvcc:
        return None, "host-side inline assembly not checked: nvcc not found"
    with tempfile.TemporaryDirectory(prefix="stencil-host-") as tmp:
        out = Path(tmp) / "host.ii"
        run = process.run([nvcc, "-std=c++17", f"-I{KIT_ROOT / 'grader' / 'include'}", "-cuda",
                        str(Path(source).resolve()), "-o", out], TOOL_TIMEOUT_S)
        if run.returncode != 0 or not out.is_file():
            return None, f"host-side inline assembly not checked: nvcc -cuda {run.describe()}"
        return host_asm_lines(out.read_text(errors="replace"), Path(source)), ""


# ---------------------------------------------------------------- the check

@dataclass
class Finding:
    """One forbidden thing in the object: what (symbols or an instruction), why, where."""

    what: str
    why: str
    lines: list[int] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = "line " + ", ".join(map(str, self.lines)) + ": " if self.lines else ""
        used_in = f" (in {', '.join(self.functions[:3])})" if self.functions else ""
        return f"{where}{self.what}{used_in}: {self.why}"


def _names(names: list[str]) -> str:
    names = list(dict.fromkeys(names))
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def symbol_findings(listing: ObjectListing, src: str, api: frozenset[str],
                   extra: tuple[str, ...] = (), taken=None) -> list[Finding]:
    """Every forbidden undefined symbol, defined symbol and system-call instruction of an object;
    symbols that share a reason and a source line are one finding (`std::ofstream` needs a dozen)."""
    groups: dict[tuple, tuple[list[int], list[str], list[str]]] = {}
    for s in listing.undefined:
        why = forbidden_reason(s.name, s.demangled, extra)
        if why is None:
            continue
        lines = source_lines(src, s)
        key = (why, tuple(lines) if lines else tuple(sorted(listing.users.get(s.name, ()))) or s.shown)
        _, names, functions = groups.setdefault(key, (lines, [], []))
        names.append(s.shown)
        functions.extend(f for f in sorted(listing.users.get(s.name, ())) if f not in functions)
    findings = [Finding(_names(names), why, lines, functions)
                for (why, _), (lines, names, functions) in groups.items()]
    known: list[Taken] = []
    for s in listing.defined:
        if not s.name.startswith("_Z") and s.name not in api and re.fullmatch(r"[A-Za-z_]\w*", s.name) \
                and not known and taken is not None:
            known.append(taken())             # read the libraries once, and only when needed
        if why := defined_reason(s.name, api, s.kind, known[0] if known else None):
            findings.append(Finding(f"{s.shown} (defined here)", why, source_lines(src, s)))
    findings += [Finding(f"instruction `{insn}`", _WHY_SYSCALL + " (host-side inline assembly)",
                         syscall_lines(src)[:3], [function]) for insn, function in listing.syscalls]
    if listing.before_main:
        findings.append(Finding(f"code that runs before main ({_names(listing.before_main)})", _WHY_BEFORE_MAIN))
    findings.sort(key=lambda f: (f.lines[0] if f.lines else 1 << 30, f.what))
    return findings


def check_object(build_dir: Path, source: Path, extra: tuple[str, ...] = ()) -> StaticCheck:
    """The "linked symbols" check of one lab build: BUILD_DIR/kernel.o against the whitelist,
    system-call instructions, and host-side inline assembly in the student file."""
    name = "linked symbols"
    obj = Path(build_dir) / "kernel.o"
    if not obj.is_file():
        return StaticCheck(name, "skipped", "forbidden",
                           f"{obj} not found: the compiled object's symbols were not checked")
    listing = read_object(obj)
    if listing.error:
        return StaticCheck(name, "skipped", "forbidden",
                           f"the compiled object could not be read ({listing.error}): its symbols were "
                           "not checked")
    try:
        src = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        src = ""
    findings = symbol_findings(listing, src, api_names(), extra,
                               lambda: taken_names(build_dir, find_nvcc()))
    asm, note = check_host_asm(Path(source), src) if src else ([], "")
    asm = [line for line in asm if not any(line in f.lines for f in findings if f.what.startswith("instr"))]
    if asm:
        findings.append(Finding("host-side inline assembly (asm)",
                                "host code is C++ only; inline PTX belongs in device functions", asm[:3]))
    if not findings:
        return StaticCheck(name, "pass", "forbidden", f"{len(listing.undefined)} external symbols of kernel.o, all on "
                           "the whitelist; no system-call instruction" + (f"; {note}" if note else ""))
    more = [f"... and {len(findings) - MAX_REPORTED} more"] if len(findings) > MAX_REPORTED else []
    details = [f.describe() for f in findings[:MAX_REPORTED]] + more + ([note] if note else [])
    return StaticCheck(name, "fail", "forbidden",
                       f"{len(findings)} forbidden use(s) in the compiled {Path(source).name}; the lab is "
                       "not run", details)
