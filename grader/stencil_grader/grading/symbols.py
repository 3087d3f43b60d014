"""What the compiled student object may link against: a whitelist of external symbols.

The student's kernel.cu is linked into the two programs the grader reads
results from (check and bench), so what it can call decides what it can do.
After the build, BUILD_DIR/kernel.o (nvcc -c of the student file) is read with
binutils:

- `nm -P` lists its symbols.  Every *undefined* one (a function or variable the
  file uses from elsewhere) must be on the whitelist below: nvcc's own
  registration and launch symbols, the CUDA runtime calls a launcher needs
  (launch and its configuration, error queries, function attributes,
  occupancy, device attributes, symbol addresses, asynchronous memset and
  memcpy on the stream), the math library, and the compiler's support symbols.
  Anything else (files, streams, processes, the environment, dynamic loading,
  allocation, host synchronisation, the harness's own functions) is forbidden.
  A lab can forbid whitelisted calls too (lab.json constraints.forbidden_calls).
- Every *defined* global symbol with C linkage must be a launcher of the student
  API (grader/include/stencil_lab.h): a file that defines `fprintf`,
  `cpu_stencil2d_sweep` or `main` would replace the harness's or the C
  library's own (the linker takes the object's definition first).
- `objdump -dr` disassembles the host code: a system-call instruction
  (x86-64 `syscall`, `sysenter`, `int $0x80`; AArch64 `svc`) is forbidden, and
  each relocation names the function that uses a forbidden symbol.

Device code is not in these listings (it is inside the embedded fatbinary), and
needs none of this: a kernel can reach nothing outside the GPU's memory.

A finding names the symbol, demangled, the host function that uses it and,
where a lexical search of the source finds it, the line.  Names are matched on
the compiled object, so a harmless identifier (`const int cpu_count = 0;`)
never trips the check, and no spelling (a macro, an `__asm__` label, a
template) hides a call.  See grader/README.md, section Threat model.
"""

from __future__ import annotations

import platform
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import kinds, process
from ..base.toolkit import find_nvcc
from .checks import StaticCheck
from .source import strip_source
from .checks import MAX_REPORTED

TOOL_TIMEOUT_S = 60.0

# ---------------------------------------------------------------- the whitelist

#: nvcc's own host code: fatbinary registration, kernel stubs, launch configuration.
NVCC_SUPPORT = frozenset({
    "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary",
    "__cudaRegisterFunction", "__cudaRegisterVar", "__cudaInitModule",
    "__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
    "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz", "__cudaGetKernel",
})

#: CUDA runtime calls a launcher needs.  Each may also appear with the _ptsz / _ptds
#: suffix (per-thread default stream) or as a versioned _v2.
RUNTIME_ALLOWED = frozenset({
    # launch and its configuration
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaFuncGetAttributes", "cudaFuncSetAttribute", "cudaFuncSetCacheConfig",
    "cudaFuncSetSharedMemConfig",
    # error queries
    "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName",
    # occupancy
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaOccupancyAvailableDynamicSMemPerBlock", "cudaOccupancyMaxPotentialClusterSize",
    "cudaOccupancyMaxActiveClusters",
    # the device and its attributes
    "cudaGetDevice", "cudaDeviceGetAttribute", "cudaGetDeviceProperties", "cudaDeviceGetLimit",
    "cudaRuntimeGetVersion", "cudaDriverGetVersion",
    # symbol addresses (a static __device__ scratch array)
    "cudaGetSymbolAddress", "cudaGetSymbolSize",
    # asynchronous memset and memcpy on the stream (static.py checks a copy's direction)
    "cudaMemsetAsync", "cudaMemset2DAsync", "cudaMemcpyAsync", "cudaMemcpy2DAsync",
    "cudaMemcpyToSymbolAsync",
})

#: The C math library, float (f) and long double (l) forms included.
_MATH_BASES = (
    "acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ldexp "
    "log log10 log1p log2 logb ilogb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma "
    "tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod remainder remquo "
    "copysign nan nextafter nexttoward fdim fmax fmin fma sincos exp10").split()
MATH = frozenset(b + s for b in _MATH_BASES for s in ("", "f", "l")) | frozenset({
    "__isnan", "__isnanf", "__isinf", "__isinff", "__finite", "__finitef", "__fpclassify",
    "__fpclassifyf", "__signbit", "__signbitf"})

#: The compiler's own support: exception unwinding, guarded statics, static destructors
#: (nvcc registers its fatbinary's with atexit), stack protector, block copies it emits
#: for struct assignment, and a host assert().  And exit: nvcc compiles every __device__
#: function that is not inlined into a host stub whose body is `exit(1)`, so an honest file
#: references it.  A launcher that calls exit itself gains nothing: the Check runner's exit
#: guard (grader/harness/check_runner.c) turns an exit in the middle of a case into a crash,
#: and a bench that exits early prints no figures.
COMPILER_SUPPORT = frozenset({
    "__gxx_personality_v0", "_Unwind_Resume", "__cxa_guard_acquire", "__cxa_guard_release",
    "__cxa_guard_abort", "__cxa_atexit", "atexit", "__dso_handle", "__cxa_begin_catch",
    "__cxa_end_catch", "__cxa_pure_virtual", "__stack_chk_fail", "_GLOBAL_OFFSET_TABLE_",
    "memcpy", "memmove", "memset", "_ZSt9terminatev", "__assert_fail", "exit",
})

_VERSION_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")

# ---------------------------------------------------------------- why a symbol is forbidden

_WHY_SYNC = ("host synchronisation: launchers are asynchronous on their stream; the harness "
             "synchronises and times")
_WHY_COPY = ("memory copy to or from the host, or a blocking copy: the launcher computes on the GPU, "
             "in the device buffers it is given (a copy on the stream is cudaMemcpyAsync, device to "
             "device)")
_WHY_HOSTMEM = "host or managed memory: the launcher works on the device memory the harness allocated"
_WHY_DEVICE = "device control: the harness chose the device and owns its state"
_WHY_ALLOC = ("allocation: a launcher allocates nothing (on a hot path it would cost more than the "
              "sweep); every buffer comes from the harness, and scratch space can be a static "
              "__device__ array")
_WHY_FILE = "file, stream or terminal I/O: a kernel file reads and writes nothing outside the GPU"
_WHY_PROCESS = "process control: a kernel file starts, signals and ends no process"
_WHY_ENV = "the environment: the grader's settings are not the kernel's business"
_WHY_DL = "dynamic loading: a kernel file uses only what the build links"
_WHY_SYSCALL = "a system call: a kernel file asks nothing of the operating system"
_WHY_HARNESS = "the harness's own code: the student file may not call into the grader"
_WHY_HOSTFN = "host work on the stream (callbacks, graphs, events, streams): a launcher only launches"
_WHY_OTHER = ("not on the list of what a launcher may call (kernel launches, the CUDA runtime calls a "
              "launcher needs, the math library)")
_WHY_LAB = "forbidden in this lab (lab.json constraints.forbidden_calls)"

#: (pattern on the plain or demangled name, reason), first match wins.
_CATEGORIES: list[tuple[re.Pattern, str]] = [(re.compile(p), why) for p, why in (
    (r"^cuda(Device|Stream|Event)Synchronize|^cudaStreamQuery|^cudaEventQuery|^cudaThreadSynchronize",
     _WHY_SYNC),
    (r"^cudaMalloc(Managed|Host)|^cudaHostAlloc|^cudaHostRegister|^cudaFreeHost|^__cudaRegisterManagedVar",
     _WHY_HOSTMEM),
    (r"^cudaMalloc|^cudaFree|^cudaMemPool|^cudaArray|^cudaMalloc3D", _WHY_ALLOC),
    (r"^cudaMemcpy|^cudaMemset", _WHY_COPY),
    (r"^cuda(SetDevice|DeviceReset|DeviceSet|SetValidDevices|SetDeviceFlags|DeviceEnable|DeviceDisable|"
     r"CtxResetPersistingL2Cache|DeviceFlushGPUDirect|IpcOpen|IpcGet|IpcClose)", _WHY_DEVICE),
    (r"^cuda(LaunchHostFunc|StreamAddCallback|Graph|Stream|Event|UserObject)", _WHY_HOSTFN),
    (r"^(harness_|cpu_|lab_|srunner_|suite_|tcase_|ck_|_ck_|check_)", _WHY_HARNESS),
    (r"^(malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|mmap|mmap64|"
     r"munmap|mprotect|brk|sbrk|_Zn[wa]|_Zd[la]|operator new|operator delete)", _WHY_ALLOC),
    (r"^(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv|environ|__environ)$", _WHY_ENV),
    (r"^(dlopen|dlsym|dlvsym|dlclose|dlerror|dladdr|dlinfo|dlmopen|__libc_dl)", _WHY_DL),
    (r"^(syscall|__syscall)", _WHY_SYSCALL),
    (r"^(system|popen|pclose|fork|vfork|clone|exec[lv]|execve|fexecve|posix_spawn|kill|killpg|raise|"
     r"signal|sigaction|exit|_exit|_Exit|quick_exit|at_quick_exit|abort|setuid|setgid|seteuid|setegid|"
     r"prctl|ptrace|pthread_create|daemon|setsid|chroot|wait|waitpid)", _WHY_PROCESS),
    (r"^(std::(basic_)?[io]?f?stream|std::basic_(ios|streambuf|filebuf|ostream|istream|iostream|"
     r"ofstream|ifstream|fstream|stringbuf|ostringstream|istringstream)|std::ios_base|std::__basic_file|"
     r"std::cout|std::cerr|std::clog|std::cin|std::__ostream_insert|std::endl|std::locale|"
     r"(VTT|vtable|typeinfo) for std::basic_|std::filesystem|std::__fs)", _WHY_FILE),
    (r"^(f?open|open64|openat|openat2|creat|fopen64|freopen|fdopen|f?close|read|write|pread|pwrite|"
     r"readv|writev|f?read|f?write|fputs|fputc|fgets|fgetc|getc|putc|putchar|puts|printf|fprintf|"
     r"dprintf|vprintf|vfprintf|vdprintf|fflush|fseek|ftell|rewind|unlink|unlinkat|rename|renameat|"
     r"remove|mkdir|rmdir|chmod|fchmod|chown|truncate|ftruncate|link|symlink|stat|fstat|lstat|access|"
     r"opendir|readdir|dup|dup2|dup3|pipe|socket|connect|bind|send|recv|sendto|recvfrom|ioctl|fcntl|"
     r"sendfile|splice|tee|stdout|stderr|stdin|_IO_|__printf_chk|__fprintf_chk|__vfprintf_chk|"
     r"__sprintf_chk|__snprintf_chk|__read_chk|__open|__isoc99_)", _WHY_FILE),
)]


def forbidden_reason(name: str, demangled: str | None = None, extra: tuple[str, ...] = ()) -> str | None:
    """Why an undefined symbol of the student object is forbidden, or None when it is allowed.

    name: the symbol as the object names it (mangled for C++); demangled: its
    demangled form when different; extra: names the lab forbids on top
    (lab.json constraints.forbidden_calls), matched on the plain name.
    """
    plain = _VERSION_SUFFIX.sub("", name)
    if name in extra or plain in extra:
        return _WHY_LAB
    if name in NVCC_SUPPORT or name in COMPILER_SUPPORT or name in MATH:
        return None
    if plain in RUNTIME_ALLOWED or plain in NVCC_SUPPORT or name.startswith("cudaOccupancy"):
        return None
    for text in (name, demangled or name):
        for pattern, why in _CATEGORIES:
            if pattern.search(text):
                return why
    return _WHY_OTHER


def api_names(header: Path | None = None) -> frozenset[str]:
    """The launchers of the student API: the functions a kernel file may define with C linkage.

    Without `header`, every launcher of every kind in grader/kinds.json (the one place that
    names them; tests/python/test_kinds.py checks that grader/include/stencil_lab.h declares
    exactly those); with one, the functions that header declares."""
    if header is None:
        return kinds.launcher_names()
    code = strip_source(Path(header).read_text())[0]
    code = re.sub(r"^[ \t]*#.*$", "", code, flags=re.MULTILINE)
    return frozenset(re.findall(r"\b([A-Za-z_]\w*)\s*\(", code)) - {"extern", "typedef", "sizeof"}


def defined_reason(name: str, api: frozenset[str], kind: str = "T") -> str | None:
    """Why the object may not define this global symbol (nm's letter kind), or None.

    C names must be launchers of the student API; C++ names must not be the
    global operator new/delete, nor a strong definition in namespace std (a weak
    one is an inline library function the compiler instantiated).  A definition
    with any other C name would replace the harness's, Check's or the C library's own.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return None            # a compiler's own name (DW.ref.__gxx_personality_v0): C cannot name it
    if name.startswith("_Z"):
        if re.match(r"_Zn[wa]|_Zd[la]", name) or kind in "TDBRGS" and re.match(r"_Z(N[KVR]*)?St", name):
            return ("defines a C++ standard library function or the global operator new/delete, "
                    "which would replace the library's own for the whole program")
        return None
    if name in api:
        return None
    return ("defines a function or variable with C linkage that is not a launcher of "
            "stencil_lab.h: it would replace the harness's, Check's or the C library's own "
            "(declare helpers static, or inside an anonymous namespace)")


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
    error: str | None = None


def parse_nm(text: str) -> tuple[list[Symbol], list[Symbol]]:
    """(undefined, defined global) symbols from `nm -P` output ("name type [value [size]]")."""
    undefined, defined = [], []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or len(parts[1]) != 1:
            continue
        name, kind = parts[0], parts[1]
        if kind in "Uwv" and (kind == "U" or len(parts) == 2 or kind in "wv" and _zero(parts[2:])):
            undefined.append(Symbol(name, kind))
        elif kind in "TDBRGSVWiu" and kind != "i":   # global (upper case), weak (W/V), unique (u)
            defined.append(Symbol(name, kind))
    return undefined, defined


def _zero(values: list[str]) -> bool:
    return all(v.strip("0") == "" for v in values)


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


def simplify(demangled: str) -> str:
    """A demangled name without template arguments and parameter lists, for messages:
    'std::basic_filebuf::open' for 'std::basic_filebuf<char, ...>::open(char const*, ...)'."""
    out, depth = [], 0
    for ch in demangled:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    for suffix in (" const", " volatile", " &", " &&"):
        text = text.removesuffix(suffix)
    if text.endswith(")") and not text.startswith(("vtable", "VTT", "typeinfo")):
        depth = 0
        for i in range(len(text) - 1, -1, -1):        # the parameter list: the last (...) group
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i] if i > 0 and not text[:i].endswith("operator") else text
                break
    return text.strip()


def _tool(name: str) -> str | None:
    return shutil.which(name)


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled names (c++filt, one call); names c++filt leaves alone map to themselves."""
    mangled = [n for n in names if n.startswith("_Z")]
    result = {n: n for n in names}
    if not mangled or not _tool("c++filt"):
        return result
    run = process.run(["c++filt"], TOOL_TIMEOUT_S, stdin_text="\n".join(mangled) + "\n")
    lines = run.stdout.splitlines()
    if run.returncode == 0 and len(lines) == len(mangled):
        result.update(zip(mangled, lines))
    return result


def read_object(obj: Path) -> ObjectListing:
    """nm and objdump of one object file; never raises (see ObjectListing.error)."""
    listing = ObjectListing()
    for tool in ("nm", "objdump"):
        if not _tool(tool):
            listing.error = f"{tool} (binutils) is not installed"
            return listing
    nm = process.run(["nm", "-P", obj], TOOL_TIMEOUT_S)
    if nm.returncode != 0:
        listing.error = f"nm {nm.describe()}: {process.tail_lines(nm.stderr, 3)}"
        return listing
    listing.undefined, listing.defined = parse_nm(nm.stdout)
    dump = process.run(["objdump", "-dr", "-w", "--no-show-raw-insn", obj], TOOL_TIMEOUT_S)
    if dump.returncode != 0:
        listing.error = f"objdump {dump.describe()}: {process.tail_lines(dump.stderr, 3)}"
        return listing
    listing.users, listing.syscalls = parse_objdump(dump.stdout)
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
            number = int(m.group(1))
            current = m.group(2)
            continue
        if current is not None and (current == target or Path(current).name == source.name
                                    and Path(current).resolve() == Path(target)):
            if _ASM_KEYWORD.search(text):
                lines.append(number)
        number += 1
    return sorted(set(lines))


def check_host_asm(source: Path, src: str) -> tuple[list[int] | None, str]:
    """(lines with host-side inline assembly, or None when it could not be checked; a note).

    Only a file whose code names asm at all is translated (nvcc -cuda, about 2 s);
    device code's inline PTX is removed by nvcc before the host compiler sees it,
    so it never counts.
    """
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
                   extra: tuple[str, ...] = ()) -> list[Finding]:
    """Every forbidden undefined symbol, defined symbol and system-call instruction of an object.

    Symbols that share a reason and a source line are reported as one finding
    (one `std::ofstream` needs a dozen library symbols).
    """
    groups: dict[tuple, tuple[list[int], list[str], list[str]]] = {}
    for s in listing.undefined:
        why = forbidden_reason(s.name, s.demangled, extra)
        if why is None:
            continue
        lines = source_lines(src, s) if src else []
        key = (why, tuple(lines) if lines else tuple(sorted(listing.users.get(s.name, ()))) or s.shown)
        _, names, functions = groups.setdefault(key, (lines, [], []))
        names.append(s.shown)
        functions.extend(f for f in sorted(listing.users.get(s.name, ())) if f not in functions)
    findings = [Finding(_names(names), why, lines, functions)
                for (why, _), (lines, names, functions) in groups.items()]
    for s in listing.defined:
        why = defined_reason(s.name, api, s.kind)
        if why:
            lines = source_lines(src, s) if src else []
            findings.append(Finding(f"{s.shown} (defined here)", why, lines))
    asm_lines = syscall_lines(src) if src else []
    for insn, function in listing.syscalls:
        findings.append(Finding(f"instruction `{insn}`", _WHY_SYSCALL + " (host-side inline assembly)",
                                asm_lines[:3], [function]))
    findings.sort(key=lambda f: (f.lines[0] if f.lines else 1 << 30, f.what))
    return findings


def check_object(build_dir: Path, source: Path, extra: tuple[str, ...] = (),
                 api: frozenset[str] | None = None) -> StaticCheck:
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
    findings = symbol_findings(listing, src, api if api is not None else api_names(), extra)
    asm, note = check_host_asm(Path(source), src) if src else ([], "")
    asm = [line for line in asm if not any(line in f.lines for f in findings if f.what.startswith("instr"))]
    if asm:
        findings.append(Finding("host-side inline assembly (asm)",
                                "host code is C++ only; inline PTX belongs in device functions", asm[:3]))
    if not findings:
        message = (f"{len(listing.undefined)} external symbols of kernel.o, all on the whitelist; "
                   "no system-call instruction")
        return StaticCheck(name, "pass", "forbidden", message + (f"; {note}" if note else ""))
    details = [f.describe() for f in findings[:MAX_REPORTED]]
    if len(findings) > MAX_REPORTED:
        details.append(f"... and {len(findings) - MAX_REPORTED} more")
    if note:
        details.append(note)
    return StaticCheck(name, "fail", "forbidden",
                       f"{len(findings)} forbidden use(s) in the compiled {Path(source).name}; the lab is "
                       "not run", details)
