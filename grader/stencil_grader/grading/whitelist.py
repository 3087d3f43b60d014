"""What the compiled student object may link against and define: the whitelist of external
symbols, why anything else is forbidden, and which definitions the object may hold.

symbols.py reads the object (nm, objdump) and applies these rules; grader/README.md, section
Threat model, says why each exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..base import kinds
from .linkage import Taken
from .source import strip_source

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
_WHY_PRINTF = ("printf in host code: file, stream or terminal output from the launcher is not allowed; printf "
               "inside a kernel (__global__ or __device__ code) is fine, and the report shows what it prints")
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
    code = strip_source(Path(header).read_text())[0]
    code = re.sub(r"^[ \t]*#.*$", "", code, flags=re.MULTILINE)
    return frozenset(re.findall(r"\b([A-Za-z_]\w*)\s*\(", code)) - {"extern", "typedef", "sizeof"}


#: C reserves names that begin with two underscores, or one and a capital letter, for the
#: implementation (C11 7.1.3): the compiler, the C library and the CUDA runtime use them for
#: their own hooks, some of which no library defines (a weak reference such as __gmon_start__).
_RESERVED = re.compile(r"^(__|_[A-Z])")


def defined_reason(name: str, api: frozenset[str], kind: str = "T", taken: Taken | None = None) -> str | None:
    """Why the object may not define this global symbol (nm's letter kind), or None: a C++ global
    operator new/delete or strong std:: definition; a C name that is no launcher and is reserved,
    or that what check and bench link with defines or uses (taken: linkage.taken_names)."""
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
