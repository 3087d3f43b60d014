"""What the compiled student object may link against and define (symbols.py applies it; grader/README.md,
section 6, says why): the whitelist of external symbols, why anything else is forbidden, and which
definitions it may hold: no C name that what check and bench link with defines or uses (taken_names,
read from the libraries' own symbol tables; Taken.error when they cannot be read, and then the
definition is refused).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import kinds, process
from .names import TOOL_TIMEOUT_S
from .source import header_code

# ---------------------------------------------------------------- the whitelist

#: nvcc's own host code: fatbinary registration, kernel stubs, launch configuration.
NVCC_SUPPORT = frozenset((
    "__cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction "
    "__cudaRegisterVar __cudaInitModule __cudaPushCallConfiguration __cudaPopCallConfiguration __cudaLaunchKernel "
    "__cudaLaunchKernel_ptsz __cudaGetKernel").split())

#: CUDA runtime calls a launcher needs.  Each may also appear with the _ptsz / _ptds
#: suffix (per-thread default stream) or as a versioned _v2.
RUNTIME_ALLOWED = frozenset((
    "cudaLaunchKernel cudaLaunchKernelExC cudaLaunchCooperativeKernel cudaFuncGetAttributes "    # launch and its
    "cudaFuncSetAttribute cudaFuncSetCacheConfig cudaFuncSetSharedMemConfig "                    # configuration
    "cudaGetLastError cudaPeekAtLastError cudaGetErrorString cudaGetErrorName "                  # error queries
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags "
    "cudaOccupancyAvailableDynamicSMemPerBlock cudaOccupancyMaxPotentialClusterSize cudaOccupancyMaxActiveClusters "
    "cudaGetDevice cudaDeviceGetAttribute cudaGetDeviceProperties cudaDeviceGetLimit "           # the device
    "cudaRuntimeGetVersion cudaDriverGetVersion "
    "cudaGetSymbolAddress cudaGetSymbolSize "                  # symbol addresses (a static __device__ scratch array)
    # asynchronous memset and memcpy on the stream (source.py signals a copy's direction)
    "cudaMemsetAsync cudaMemset2DAsync cudaMemcpyAsync cudaMemcpy2DAsync cudaMemcpyToSymbolAsync").split())

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
COMPILER_SUPPORT = frozenset((
    "__gxx_personality_v0 _Unwind_Resume __cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_atexit "
    "atexit __dso_handle __cxa_begin_catch __cxa_end_catch __cxa_pure_virtual __stack_chk_fail _GLOBAL_OFFSET_TABLE_ "
    "memcpy memmove memset _ZSt9terminatev __assert_fail exit").split())

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
_WHY_PRINTF = ("printf in host code: file, stream or terminal output from the launcher is not allowed; printf "
               "inside a kernel (__global__ or __device__ code) is fine, and the report shows what it prints")
_WHY_PROCESS = "process control: a kernel file starts, signals and ends no process"
_WHY_ENV = "the environment: the grader's settings are not the kernel's business"
_WHY_DL = "dynamic loading: a kernel file uses only what the build links"
_WHY_SYSCALL = "a system call: a kernel file asks nothing of the operating system"
_WHY_BEFORE_MAIN = ("a static initializer, constructor or IFUNC: the file's code runs only when the harness calls a "
                    "launcher (before main, the GPU may still be timing another grading); initialise in the "
                    "launcher, or with constants")
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
    (r"^(printf|vprintf|puts|putchar|fprintf|vfprintf|fputs|__printf_chk|__fprintf_chk|__vfprintf_chk)$",
     _WHY_PRINTF),
    (r"^(f?open|open64|openat|openat2|creat|fopen64|freopen|fdopen|f?close|read|write|pread|pwrite|"
     r"readv|writev|f?read|f?write|fputs|fputc|fgets|fgetc|getc|putc|putchar|puts|printf|fprintf|"
     r"dprintf|vprintf|vfprintf|vdprintf|fflush|fseek|ftell|rewind|unlink|unlinkat|rename|renameat|"
     r"remove|mkdir|rmdir|chmod|fchmod|chown|truncate|ftruncate|link|symlink|stat|fstat|lstat|access|"
     r"opendir|readdir|dup|dup2|dup3|pipe|socket|connect|bind|send|recv|sendto|recvfrom|ioctl|fcntl|"
     r"sendfile|splice|tee|stdout|stderr|stdin|_IO_|__printf_chk|__fprintf_chk|__vfprintf_chk|"
     r"__sprintf_chk|__snprintf_chk|__read_chk|__open|__isoc99_)", _WHY_FILE),
)]


def forbidden_reason(name: str, demangled: str | None = None, extra: tuple[str, ...] = ()) -> str | None:
    """Why an undefined symbol (name as the object has it, and demangled) is forbidden, or None;
    extra: names the lab forbids on top (lab.json constraints.forbidden_calls)."""
    plain = _VERSION_SUFFIX.sub("", name)
    if name in extra or plain in extra:
        return _WHY_LAB
    if name in NVCC_SUPPORT | COMPILER_SUPPORT | MATH or plain in RUNTIME_ALLOWED | NVCC_SUPPORT \
            or name.startswith("cudaOccupancy"):
        return None
    return next((why for text in (name, demangled or name) for pattern, why in _CATEGORIES if pattern.search(text)),
                _WHY_OTHER)


def api_names(header: Path | None = None) -> frozenset[str]:
    """The launchers a kernel file may define with C linkage: every kind's in grader/kinds.json, or
    the functions `header` declares."""
    if header is None:
        return kinds.launcher_names()
    return frozenset(re.findall(r"\b([A-Za-z_]\w*)\s*\(", header_code(header))) - {"extern", "typedef", "sizeof"}


#: C reserves names that begin with two underscores, or one and a capital letter, for the
#: implementation (C11 7.1.3): the compiler, the C library and the CUDA runtime use them for
#: their own hooks, some of which no library defines (a weak reference such as __gmon_start__).
_RESERVED = re.compile(r"^(__|_[A-Z])")


def defined_reason(name: str, api: frozenset[str], kind: str = "T", taken: Taken | None = None) -> str | None:
    """Why the object may not define this global symbol (nm's letter kind), or None: a C++ global
    operator new/delete or strong std:: definition; a C name that is no launcher and is reserved,
    or that what check and bench link with defines or uses (taken: taken_names)."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return None            # a compiler's own name (DW.ref.__gxx_personality_v0): C cannot name it
    if name.startswith("_Z"):
        if re.match(r"_Zn[wa]|_Zd[la]", name) or kind in "TDBRGS" and re.match(r"_Z(N[KVR]*)?St", name):
            return ("defines a C++ standard library function or the global operator new/delete, "
                    "which would replace the library's own for the whole program")
        return None
    if name in api:
        return None
    rename = "rename it, or declare it without extern \"C\" (helpers: static, or in an anonymous namespace)"
    if _RESERVED.match(name):
        return (f"defines {name} with C linkage, a name reserved for the compiler and the libraries (it starts "
                f"with __ or _ and a capital): {rename}")
    if taken is None or taken.error:
        why = taken.error if taken is not None else "not read"
        return (f"defines {name} with C linkage, and the libraries it could replace could not be read ({why}): "
                f"{rename}")
    if name in taken.names:
        return (f"defines {name} with C linkage, a name that {taken.says(name)} (linked into check and bench): "
                f"the definition would take the place of the library's own; {rename}")
    return None


# ---------------------------------------------------------------- the names check and bench link with

PROGRAMS = ("check", "bench")
_SYSTEM_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
_DYNAMIC = re.compile(r"\((NEEDED|RUNPATH|RPATH)\)\s+[^\[]*\[([^\]]*)\]")
_CACHE_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@dataclass
class Taken:
    """names: C name -> (the file that defines it, or else the first that refers to it; whether
    that file defines it); error: what could not be read ("" when everything was)."""

    names: dict[str, tuple[str, bool]] = field(default_factory=dict)
    error: str = ""

    def add(self, symbols: list[tuple[str, bool]], where: Path) -> None:
        for name, defined in symbols:
            name = name.split("@", 1)[0]
            if name not in self.names or defined and not self.names[name][1]:
                self.names[name] = (Path(where).name, defined)

    def says(self, name: str) -> str:
        """'libc.so.6 defines', or 'libfoo.so uses' for a name a file only refers to."""
        where, defined = self.names[name]
        return f"{where} {'defines' if defined else 'uses'}"


def nm_names(path: Path, dynamic: bool) -> list[tuple[str, bool]] | None:
    """(name, defined) of each symbol of a library or object (`nm -D` for a shared library's
    dynamic table, `nm -g` for an object or archive's global ones), or None when nm cannot read it."""
    run = process.run(["nm", "-D" if dynamic else "-g", str(path)], TOOL_TIMEOUT_S)
    if run.returncode != 0 and not run.stdout:
        return None
    rows = [line.split() for line in run.stdout.splitlines() if not line.endswith(":")]
    return [(parts[-1], parts[-2] not in ("U", "w", "v")) for parts in rows if len(parts) >= 2]


def dynamic_section(path: Path) -> tuple[list[str], list[str]]:
    """(NEEDED libraries, RUNPATH/RPATH directories) of an ELF file, from `readelf -d`."""
    run = process.run(["readelf", "-d", str(path)], TOOL_TIMEOUT_S)
    needed, paths = [], []
    for kind, value in _DYNAMIC.findall(run.stdout):
        if kind == "NEEDED":
            needed.append(value)
        else:
            paths += [p.replace("$ORIGIN", str(Path(path).parent)) for p in value.split(":") if p]
    return needed, paths


def ldconfig_cache() -> dict[str, str]:
    """library file name -> path, from `ldconfig -p` (the dynamic loader's cache; a 64-bit entry
    before a 32-bit one of the same name); {} without it."""
    tool = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                            if os.access(p, os.X_OK)), None)
    if not tool:
        return {}
    entries = [m.groups() for line in process.run([tool, "-p"], TOOL_TIMEOUT_S).stdout.splitlines()
               if (m := _CACHE_LINE.match(line))]
    return {name: path for name, _, path in reversed(sorted(entries, key=lambda e: "64" not in e[1]))}


def shared_libraries(programs: list[Path]) -> tuple[list[Path], list[str]]:
    """(every shared library the programs need, directly or not; the names that were not found)."""
    cache = ldconfig_cache()
    found: dict[str, Path] = {}
    missing: list[str] = []
    todo = [(Path(p), []) for p in programs]
    while todo:
        path, inherited = todo.pop()
        needed, runpath = dynamic_section(path)
        for name in needed:
            if name in found or name in missing:
                continue
            where = next((Path(d) / name for d in runpath + inherited if (Path(d) / name).is_file()), None) \
                or (Path(cache[name]) if name in cache else None) \
                or next((Path(d) / name for d in _SYSTEM_DIRS if (Path(d) / name).is_file()), None)
            if where is None:
                missing.append(name)
            else:
                found[name] = where
                todo.append((where, runpath + inherited))
    return list(found.values()), missing


def cuda_runtime(nvcc: str | None) -> Path | None:
    """The toolkit's CUDA runtime library that nvcc links (static by default), beside nvcc."""
    if not nvcc:
        return None
    root = Path(nvcc).resolve().parent.parent
    return next((d / name for d in [root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))]
                 for name in ("libcudart_static.a", "libcudart.so") if (d / name).is_file()), None)


def check_library() -> list[Path]:
    """Check's static library (and shared one, where installed), from pkg-config's libdir."""
    if not shutil.which("pkg-config"):
        return []
    libdir = process.run(["pkg-config", "--variable=libdir", "check"], TOOL_TIMEOUT_S).stdout.strip()
    return [p for p in (Path(libdir) / "libcheck.a", Path(libdir) / "libcheck.so") if libdir and p.is_file()]


def taken_names(build_dir: Path, nvcc: str | None, kit_root: Path = KIT_ROOT) -> Taken:
    """Every C name the libraries and objects that check and bench are linked with define or
    reference (module docstring).  BUILD_DIR/kernel.o, the student's own, is left out."""
    taken, build_dir, problems = Taken(), Path(build_dir), []
    if not (shutil.which("nm") and shutil.which("readelf")):
        return Taken(error="nm or readelf (binutils) is not installed")
    programs = [build_dir / p for p in PROGRAMS if (build_dir / p).is_file()]
    if not programs:
        problems.append(f"no {' or '.join(PROGRAMS)} program in the build directory")
    libraries, missing = shared_libraries(programs)
    problems += [f"{name} not found" for name in missing]
    static = [o for o in sorted(build_dir.glob("*.o")) if o.name != "kernel.o"]
    static += sorted((Path(kit_root) / "build" / "harness").glob("*/libharness.a")) + check_library()
    runtime = cuda_runtime(nvcc)
    if runtime is None:
        problems.append("the CUDA runtime library was not found beside nvcc")
    # The harness and Check first, then the runtime, then the shared libraries by name (libc
    # first): a name several define is shown as the first's.
    for path, dynamic in [(p, False) for p in static] + ([(runtime, runtime.suffix == ".so")] if runtime else []) \
            + [(p, True) for p in sorted(libraries, key=lambda p: p.name)]:
        if (names := nm_names(path, dynamic)) is None:
            problems.append(f"nm could not read {path}")
        else:
            taken.add(names, path)
    taken.error = "; ".join(problems)
    return taken
