"""symbols.py: the whitelist of what the compiled student object may link against."""

import shutil
import subprocess

import pytest

from stencil_grader.grading import names, symbols, whitelist


@pytest.mark.parametrize("name", [
    "cudaLaunchKernel", "__cudaLaunchKernel", "__cudaRegisterFatBinary", "__cudaRegisterFunction",
    "__cudaRegisterVar", "__cudaPushCallConfiguration", "cudaGetLastError", "cudaPeekAtLastError",
    "cudaFuncSetAttribute", "cudaFuncGetAttributes", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaGetDevice", "cudaDeviceGetAttribute", "cudaGetDeviceProperties_v2", "cudaGetSymbolAddress",
    "cudaMemsetAsync", "cudaMemsetAsync_ptsz", "cudaMemcpyAsync", "cudaMemcpyToSymbolAsync",
    "sqrtf", "exp2", "fmaf", "floorl", "__gxx_personality_v0", "_Unwind_Resume", "__cxa_guard_acquire",
    "atexit", "__cxa_atexit", "__dso_handle", "memcpy", "_ZSt9terminatev", "__assert_fail", "exit",
])
def test_allowed(name):
    assert whitelist.forbidden_reason(name) is None


@pytest.mark.parametrize("name, demangled, words", [
    ("getenv", None, "environment"),
    ("secure_getenv", None, "environment"),
    ("dlsym", None, "dynamic loading"),
    ("dlopen", None, "dynamic loading"),
    ("fopen", None, "file"),
    ("open", None, "file"),
    ("write", None, "file"),
    ("printf", None, "file"),
    ("printf", None, "printf inside a kernel (__global__ or __device__ code) is fine"),
    ("__printf_chk", None, "printf in host code"),
    ("puts", None, "printf in host code"),
    ("stdout", None, "file"),
    ("_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode",
     "std::basic_ofstream<char, std::char_traits<char> >::basic_ofstream(char const*, std::_Ios_Openmode)",
     "file"),
    ("_ZSt4cout", "std::cout", "file"),
    ("_ZTVSt14basic_ofstreamIcSt11char_traitsIcEE", "vtable for std::basic_ofstream<char, "
     "std::char_traits<char> >", "file"),
    ("quick_exit", None, "process"),
    ("_exit", None, "process"),
    ("abort", None, "process"),
    ("system", None, "process"),
    ("fork", None, "process"),
    ("execve", None, "process"),
    ("syscall", None, "system call"),
    ("harness_fill_random", None, "harness"),
    ("cpu_stencil2d_sweep", None, "harness"),
    ("srunner_run_all", None, "harness"),
    ("malloc", None, "allocation"),
    ("_Znwm", "operator new(unsigned long)", "allocation"),
    ("cudaMalloc", None, "allocation"),
    ("cudaFreeAsync", None, "allocation"),
    ("cudaMallocManaged", None, "host or managed memory"),
    ("__cudaRegisterManagedVar", None, "host or managed memory"),
    ("cudaDeviceSynchronize", None, "synchronisation"),
    ("cudaStreamSynchronize", None, "synchronisation"),
    ("cudaMemcpy", None, "copy"),
    ("cudaMemcpyFromSymbolAsync", None, "copy"),
    ("cudaSetDevice", None, "device control"),
    ("cudaLaunchHostFunc", None, "host work"),
    ("cudaStreamCreate", None, "host work"),
    ("cudaEventElapsedTime", None, "host work"),
    ("strlen", None, "not on the list"),
])
def test_forbidden_with_a_reason(name, demangled, words):
    why = whitelist.forbidden_reason(name, demangled)
    assert why is not None and words in why


def test_a_lab_can_forbid_a_whitelisted_call():
    assert "lab.json" in whitelist.forbidden_reason("cudaMemcpyAsync", extra=("cudaMemcpyAsync",))
    assert "lab.json" in whitelist.forbidden_reason("cudaMemcpyAsync_ptsz", extra=("cudaMemcpyAsync",))


@pytest.mark.parametrize("name, ok", [
    ("stencil2d_sweep", True), ("residual_norm2", True), ("_Z6kernelPKfPf", True),
    ("DW.ref.__gxx_personality_v0", True), ("_ZN6ForgerD2Ev", True),
    ("fprintf", False), ("cpu_stencil2d_sweep", False), ("main", False), ("cudaEventElapsedTime", False),
    ("harness_compare", False), ("_ZNSt6vectorIiSaIiEE9push_backERKi", False), ("_Znwm", False),
    ("_ZdlPv", False), ("_ZSt4cout", False),
])
def test_what_the_object_may_define(name, ok):
    """Without the libraries' symbol tables (taken=None) no C name but a launcher is cleared."""
    assert (whitelist.defined_reason(name, whitelist.api_names()) is None) == ok


needs_toolchain = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("nm") and shutil.which("readelf")
                                          and shutil.which("pkg-config") and symbols.find_nvcc()),
                                     reason="cc, binutils, pkg-config or nvcc not installed")


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """A build directory of real parts (check linked with Check, check_runner.o, harness.o), read by taken_names."""
    build = tmp_path_factory.mktemp("linked")
    (build / "runner.c").write_text(
        '#include <check.h>\n#include <stdio.h>\n'
        'int main(void) { SRunner *r = srunner_create(suite_create("s")); srunner_run_all(r, CK_SILENT);\n'
        '  fprintf(stderr, "%d\\n", srunner_ntests_failed(r)); srunner_free(r); return 0; }\n')
    (build / "harness.c").write_text("int harness_compare(void) { return 1; }\n"
                                     "void cpu_stencil2d_sweep(void) {}\nint lab_verify(int x) { return x; }\n")
    cflags = subprocess.run(["pkg-config", "--cflags", "check"], capture_output=True, text=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "check"], capture_output=True, text=True).stdout.split()
    for name in ("runner", "harness"):
        subprocess.run(["cc", *cflags, "-c", str(build / f"{name}.c"), "-o", str(build / f"{name}.o")], check=True)
    (build / "runner.o").rename(build / "check_runner.o")
    subprocess.run(["cc", "-o", str(build / "check"), str(build / "check_runner.o"), str(build / "harness.o"),
                    *libs], check=True)
    return whitelist.taken_names(build, symbols.find_nvcc())


@needs_toolchain
@pytest.mark.parametrize("name, where", [
    ("step", "libc.so.6"),                  # a kernel named like regexp.h's step()
    ("fprintf", "libc.so.6"), ("index", "libc.so.6"), ("srunner_create", ""), ("main", "check_runner.o"),
    ("harness_compare", "harness.o"), ("cpu_stencil2d_sweep", "harness.o"), ("lab_verify", "harness.o"),
    ("cudaEventElapsedTime", "libcudart"),
    # extern "C" __global__ kernels (the driver API's, CuPy's and PyCUDA's style) that replace nothing
    ("stencil_kernel", None), ("jacobi_step_kernel", None), ("sweep5", None), ("stencil2d_sweep", None),
])
def test_a_c_linkage_name_is_refused_only_where_a_real_library_defines_it(linked, name, where):
    assert not linked.error, linked.error
    why = whitelist.defined_reason(name, whitelist.api_names(), "T", linked)
    if where is None:
        assert why is None, why
    else:
        assert why is not None and f"defines {name} with C linkage" in why and where in why


@needs_toolchain
def test_reserved_and_unchecked_names_are_refused(linked):
    assert "reserved" in whitelist.defined_reason("__gmon_start__", frozenset(), "T", linked)
    assert "reserved" in whitelist.defined_reason("_Exit_hook", frozenset(), "T", linked)
    unread = whitelist.Taken(error="readelf is not installed")
    assert "could not be read (readelf is not installed)" in whitelist.defined_reason("stencil_kernel",
                                                                                      frozenset(), "T", unread)


def test_inline_library_functions_the_compiler_instantiates_are_fine():
    assert whitelist.defined_reason("_ZNKSt5ctypeIcE8do_widenEc", frozenset(), "W") is None
    assert whitelist.defined_reason("_ZNKSt5ctypeIcE8do_widenEc", frozenset(), "T") is not None
    assert whitelist.defined_reason("_Znwm", frozenset(), "W") is not None


def test_api_names_come_from_the_header():
    names = whitelist.api_names()
    assert {"stencil2d_sweep", "stencil2d_periodic_sweep", "stencil2d_run", "stencil3d_sweep",
            "residual_norm2", "jacobi_sweep"} <= names
    assert "stencil2d_coeffs" not in names and "extern" not in names


def test_parse_nm():
    text = ("DW.ref.__gxx_personality_v0 V 0 8\n_Z1kPKfPfi T 10 10b\n_ZN6ForgerD1Ev W 0 1ea\n"
            "_ZN6ForgerD5Ev n 0 \n_ZL6forger b 0 1\ngetenv U \n__gmon_start__ w \nstencil2d_sweep T 240 311\n"
            "_ZZ4mainE1x u 0 4\n")
    undefined, defined = symbols.parse_nm(text)
    assert [(s.name, s.kind) for s in undefined] == [("getenv", "U"), ("__gmon_start__", "w")]
    assert [s.name for s in defined] == ["DW.ref.__gxx_personality_v0", "_Z1kPKfPfi", "_ZN6ForgerD1Ev",
                                         "stencil2d_sweep", "_ZZ4mainE1x"]


def test_parse_objdump_finds_users_and_system_calls():
    text = """
kernel.o:     file format elf64-x86-64

Disassembly of section .text:

0000000000000240 <stencil2d_sweep>:
 377:	call   37c <stencil2d_sweep+0x13c>	378: R_X86_64_PLT32	getenv-0x4
 38a:	call   38f <stencil2d_sweep+0x14f>	38b: R_X86_64_PLT32	dlsym-0x4
 394:	syscall
0000000000000000 <_ZN6ForgerD1Ev>:
  10:	call   15 <_ZN6ForgerD1Ev+0x15>	11: R_X86_64_PLT32	_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode-0x4
  20:	int    $0x80
  30:	mov    0x0(%rip),%rax	33: R_X86_64_REX_GOTPCRELX	stdout-0x4
"""
    users, calls = symbols.parse_objdump(text)
    assert users["getenv"] == {"stencil2d_sweep"} and users["stdout"] == {"_ZN6ForgerD1Ev"}
    assert calls == [("syscall", "stencil2d_sweep"), ("int $0x80", "_ZN6ForgerD1Ev")]


def test_simplify():
    assert names.simplify("std::basic_filebuf<char, std::char_traits<char> >::open(char const*, "
                            "std::_Ios_Openmode)") == "std::basic_filebuf::open"
    assert names.simplify("vtable for std::basic_ofstream<char, std::char_traits<char> >") == \
        "vtable for std::basic_ofstream"


def test_source_lines_find_the_name_a_student_wrote():
    src = ("#include <fstream>\n"
           "// std::ofstream in a comment\n"
           "struct F { ~F() { std::ofstream out(\"x\"); } };\n"
           "const char *e = getenv(\"HOME\");\n")
    vtable = symbols.Symbol("_ZTVSt14basic_ofstreamIcSt11char_traitsIcEE", "U",
                            "vtable for std::basic_ofstream<char, std::char_traits<char> >")
    assert symbols.source_lines(src, vtable) == [3]
    assert symbols.source_lines(src, symbols.Symbol("getenv", "U")) == [4]
    assert symbols.source_lines(src, symbols.Symbol("dlsym", "U")) == []


def test_host_asm_lines_in_the_host_translation(tmp_path):
    source = tmp_path / "kernel.cu"
    translation = (f'# 1 "{source}"\nint a;\n# 1 "/usr/include/stdio.h" 3\n'
                   'extern int scanf(const char *, ...) __asm__("__isoc99_scanf");\n'
                   f'# 7 "{source}"\nstatic long raw(long n) {{ __asm__ volatile("syscall"); }}\n')
    assert symbols.host_asm_lines(translation, source) == [7]


# ---------------------------------------------------------------- real objects (g++)

GXX = shutil.which("g++")


def compiled(tmp_path, code: str):
    """Compile C++ code with g++ -c; returns (object path, source path)."""
    src = tmp_path / "kernel.cu"
    src.write_text(code)
    cpp = tmp_path / "kernel.cpp"
    cpp.write_text(code)
    obj = tmp_path / "kernel.o"
    done = subprocess.run([GXX, "-O2", "-c", str(cpp), "-o", str(obj)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return obj, src


def findings(tmp_path, code):
    obj, src = compiled(tmp_path, code)
    listing = symbols.read_object(obj)
    assert listing.error is None
    return [f.describe() for f in symbols.symbol_findings(listing, src.read_text(), whitelist.api_names())]


needs_gxx = pytest.mark.skipif(GXX is None or not shutil.which("nm") or not shutil.which("objdump"),
                               reason="g++ or binutils not installed")

LAUNCHER = 'extern "C" void stencil2d_sweep(const float *in, float *out, int nx, int ny, void *stream)'
CUDA_CALL = 'extern "C" int cudaGetLastError();\n'


@needs_gxx
def test_an_honest_file_with_harness_like_names_passes(tmp_path):
    code = ("#include <cmath>\n"
            "const int cpu_count = 0;\nstatic int harness_blocks = 4;\n"
            f"{LAUNCHER} {{ int bx = (int)ceil(sqrt((double)nx)) + cpu_count + harness_blocks; (void)bx; }}\n")
    assert findings(tmp_path, code) == []


@needs_gxx
def test_the_forger_is_caught_with_its_line_and_function(tmp_path):
    code = ('#include <fstream>\n#include <string>\n'
            'struct Forger {\n'
            '  ~Forger() {\n'
            '    std::ifstream cmd("/proc/self/cmdline");\n'
            '    std::string args; std::getline(cmd, args);\n'
            '    std::ofstream out("bench.json"); out << "{\\"ratio\\": 0.91}";\n'
            '  }\n'
            '};\nstatic Forger forger;\n'
            f'{LAUNCHER} {{}}\n')
    found = findings(tmp_path, code)
    before_main = [f for f in found if f.startswith("code that runs before main")]
    found = [f for f in found if f not in before_main]
    assert len(before_main) == 1                       # registering the destructor is a static initializer
    assert found and all("(in Forger::~Forger)" in f for f in found), found
    assert any(f.startswith("line 5: ") and "basic_ifstream" in f for f in found)
    assert any(f.startswith("line 7: ") and "file, stream or terminal I/O" in f for f in found)


@needs_gxx
def test_a_renamed_getenv_is_still_getenv(tmp_path):
    code = ('extern "C" char *lookup(const char *) __asm__("getenv");\n'
            f'{LAUNCHER} {{ if (lookup("X")) out[0] = 1; }}\n')
    (found,) = findings(tmp_path, code)
    assert "getenv (in stencil2d_sweep): the environment" in found


@needs_gxx
def test_an_inline_system_call_is_caught(tmp_path):
    code = ('static long raw(long n) { long r; asm volatile("syscall" : "=a"(r) : "a"(n) : "rcx", "r11", '
            '"memory"); return r; }\n'
            f'{LAUNCHER} {{ raw(39); }}\n')
    (found,) = findings(tmp_path, code)
    assert found.startswith("line 1: instruction `syscall` (in stencil2d_sweep)")


@needs_gxx
@pytest.mark.parametrize("code,what", [
    (f"{CUDA_CALL}static int launched = cudaGetLastError();\n", "1 static initializer(s)"),
    (f"{CUDA_CALL}struct Occupier {{ Occupier() {{ cudaGetLastError(); }} }};\nstatic Occupier occupier;\n",
     "1 static initializer(s)"),
    (f"{CUDA_CALL}__attribute__((constructor(101))) static void early() {{ cudaGetLastError(); }}\n",
     "section .init_array.00101"),
    ('static void impl() {}\nstatic void (*pick())() { return impl; }\n'
     'extern "C" void chosen() __attribute__((ifunc("_ZL4pickv")));\n', "IFUNC chosen"),
], ids=["static_initializer", "constructor", "prioritised_constructor", "ifunc"])
def test_code_that_runs_before_main_is_caught(tmp_path, code, what):
    """A launch or a synchronisation before main would meet another grading's timed run on the GPU."""
    found = findings(tmp_path, code + f"{LAUNCHER} {{}}\n")
    assert len(found) == 1 and found[0].startswith("code that runs before main (") and what in found[0], found
    assert "the GPU may still be timing another grading" in found[0]


def test_nvccs_own_registration_is_the_one_initializer_allowed():
    headers = ("Idx Name          Size      VMA               LMA               File off  Algn  Flags\n"
               "  1 .text         00000120  0000000000000000  0000000000000000  00000040  2**4  CONTENTS\n"
               " 13 .init_array   0000000{n}  0000000000000000  0000000000000000  00001248  2**3  CONTENTS\n")
    nvcc = "0000000000000000 <_ZL24__sti____cudaRegisterAllv>:\n"
    assert symbols.parse_before_main(headers.format(n=8), nvcc, "") == []
    assert symbols.parse_before_main(headers.format(n=8), "", "") == [
        "1 static initializer(s) or constructor(s) in .init_array"]
    assert symbols.parse_before_main(headers.format(n="10".rjust(1)), nvcc, "launch T 0 10\n") == [
        "1 static initializer(s) or constructor(s) in .init_array"]
    assert symbols.parse_before_main(headers.format(n=8), nvcc, "pick i 0 10\n") == ["IFUNC pick"]


@needs_gxx
def test_defining_a_library_or_harness_function_is_caught(tmp_path):
    code = ('#include <cstdio>\n'
            'extern "C" int fflush(FILE *) { return 0; }\n'
            'extern "C" void cpu_stencil2d_sweep(const float *, float *, int, int) {}\n'
            f'{LAUNCHER} {{}}\n')
    found = findings(tmp_path, code)
    assert len(found) == 2 and all("(defined here)" in f for f in found)
    assert found[0].startswith("line 2: fflush") and found[1].startswith("line 3: cpu_stencil2d_sweep")


@needs_gxx
def test_check_object_reports_and_skips(tmp_path):
    obj, src = compiled(tmp_path, f'#include <cstdlib>\n{LAUNCHER} {{ abort(); }}\n')
    check = symbols.check_object(tmp_path, src)
    assert (check.name, check.status, check.severity) == ("linked symbols", "fail", "forbidden")
    assert check.details == ["line 2: abort (in stencil2d_sweep): process control: a kernel file starts, "
                             "signals and ends no process"]
    obj.unlink()
    assert symbols.check_object(tmp_path, src).status == "skipped"
