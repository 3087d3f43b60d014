"""build.py (make's outcome, the ptxas -v report, kernel labels) and buildmessage.py (what a student reads)."""

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import DATA, GOOD_KERNEL, HAVE_CHECK, KIT_ROOT, NVCC
from stencil_grader.classes import worker
from stencil_grader.grading import build, buildmessage, gradescope as gradescope_file, names, pipeline, report

needs_make = pytest.mark.skipif(not shutil.which("make"), reason="make not installed")


KIT_HEADER = KIT_ROOT / "grader" / "include" / "stencil_lab.h"
#: Lab 5's kernel template, instantiated for unaligned and aligned grids.
TEMPLATES = ("_Z23stencil3d_zmarch_kernelILb0EEvPKfPfiiiii16stencil3d_coeffs",
             "_Z23stencil3d_zmarch_kernelILb1EEvPKfPfiiiii16stencil3d_coeffs")


def by_key(kernels):
    return {(k.short_name, k.arch): k for k in kernels}


def test_ptxas_log_two_architectures():
    kernels = by_key(build.parse_ptxas_log((DATA / "ptxas_two_arch.log").read_text()))
    assert set(kernels) == {(n, a) for n in ("plain", "tiled", "dyn", "spill") for a in ("sm_90", "sm_80")}
    tiled90 = kernels[("tiled", "sm_90")]
    assert (tiled90.name, tiled90.entry, tiled90.registers, tiled90.smem_bytes) == \
        ("_Z5tiledPKfPfi", True, 16, 1040)
    assert kernels[("tiled", "sm_80")].registers == 14
    assert kernels[("tiled", "sm_80")].smem_bytes == 1040       # smem before cmem on that line
    assert kernels[("plain", "sm_90")].smem_bytes == 0
    assert kernels[("dyn", "sm_90")].smem_bytes == 0           # dynamic shared memory is not in the report
    assert all(k.spill_stores == k.spill_loads == 0 for k in kernels.values())


def test_ptxas_log_spills_warnings_and_device_function():
    kernels = build.parse_ptxas_log((DATA / "ptxas_spills.log").read_text())
    named = {k.short_name: k for k in kernels}
    spill = named["spill"]
    assert (spill.registers, spill.stack_bytes, spill.spill_stores, spill.spill_loads) == (24, 472, 588, 756)
    assert named["divk"].registers == 18
    helper = named["helper"]                                  # a non-inlined __device__ function
    assert helper.entry is False and helper.registers is None
    assert [k.short_name for k in kernels if k.entry] == ["spill", "fdiv", "divk"]


def test_ptxas_log_older_format_without_barriers():
    text = ("ptxas info    : Compiling entry function 'stencil5' for 'sm_70'\n"
            "ptxas info    : Function properties for stencil5\n"
            "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
            "ptxas info    : Used 32 registers, 2048 bytes smem, 380 bytes cmem[0]\n")
    (k,) = build.parse_ptxas_log(text)
    assert (k.name, k.arch, k.registers, k.smem_bytes, k.spill_stores) == ("stencil5", "sm_70", 32, 2048, 4)
    assert k.short_name == "stencil5"                          # extern "C" names stay as they are


def test_short_names():
    assert names.short_name("_Z5tiledPKfPfi") == "tiled"
    assert names.short_name("_ZN3foo3barEv") == "_ZN3foo3barEv"
    assert names.short_name("_Z99x") == "_Z99x"


def test_make_command(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    cmd = build.make_command(tmp_path / "lab", str(sub), tmp_path / "b", "90")
    assert cmd == ["make", "--no-print-directory", "-C", str(tmp_path / "lab"), "build", f"IMPL={sub.resolve()}",
                   f"BUILD_DIR={(tmp_path / 'b').resolve()}", "CUDA_ARCH=90"]
    assert build.make_command(tmp_path, "starter", tmp_path / "b")[4:6] == ["build", "IMPL=starter"]


def test_impl_source(tmp_path):
    assert build.impl_source("01-x", "starter", tmp_path) == tmp_path / "starter" / "01-x" / "kernel.cu"
    flat = tmp_path / "flat"
    assert build.impl_source("01-x", str(flat)) == flat / "kernel.cu"
    (tmp_path / "nested" / "01-x").mkdir(parents=True)
    (tmp_path / "nested" / "01-x" / "kernel.cu").write_text("")
    assert build.impl_source("01-x", str(tmp_path / "nested")) == tmp_path / "nested" / "01-x" / "kernel.cu"


def make_lab(tmp_path, recipe: str):
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "Makefile").write_text("build:\n" + "".join(f"\t{line}\n" for line in recipe.splitlines()))
    return lab


def student(tmp_path, content, name="sub"):
    """A submission folder tmp_path/name holding kernel.cu (text or bytes)."""
    sub = tmp_path / name
    sub.mkdir()
    (sub / "kernel.cu").write_bytes(content if isinstance(content, bytes) else content.encode())
    return sub


@needs_make
def test_compile_error_keeps_the_last_lines(tmp_path):
    lines = "; ".join(f"echo line{i}" for i in range(40))
    lab = make_lab(tmp_path, f"@{lines}; echo 'kernel.cu(7): error: expected a \";\"' >&2; exit 1")
    result = build.build(lab, "starter", tmp_path / "b")
    assert result.outcome == "compile_error" and not result.ok
    message = result.message.splitlines()
    assert len(message) <= buildmessage.MESSAGE_LINES
    assert 'kernel.cu(7): error: expected a ";"' in result.message
    assert "line39" in message and "line0" not in message


@needs_make
def test_build_timeout_is_its_own_outcome(tmp_path):
    lab = make_lab(tmp_path, "@echo compiling; sleep 30")
    result = build.build(lab, "starter", tmp_path / "b", timeout_s=1)
    assert result.outcome == "timeout"
    assert "timed out after 1 s" in result.message
    assert result.seconds < 10


@needs_make
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_lab_mk_splits_nvccs_messages_from_the_resource_report(tmp_path):
    """lab.mk: ptxas.log keeps ptxas's report; nvcc.log and the terminal get nvcc's other lines."""
    if not HAVE_CHECK:
        pytest.skip("the Check library is not installed")
    sub = student(tmp_path, (KIT_ROOT / "reference" / "01-naive-5pt" / "kernel.cu").read_text()
                  + '\n#warning "a warning of the student\'s own"\n')
    done = subprocess.run(["make", "-s", "-C", str(KIT_ROOT / "labs" / "01-naive-5pt"), str(tmp_path / "b" / "kernel.o"),
                           f"IMPL={sub}", f"BUILD_DIR={tmp_path / 'b'}", "CUDA_ARCH=90"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report, said = (tmp_path / "b" / "ptxas.log").read_text(), (tmp_path / "b" / "nvcc.log").read_text()
    assert "ptxas info" in report and "ptxas info" not in said + done.stderr
    assert "a warning of the student's own" in said and "a warning of the student's own" in done.stderr


def test_good_build_reads_ptxas_log(tmp_path):
    lab = make_lab(tmp_path, f"@cp {DATA / 'ptxas_two_arch.log'} $(BUILD_DIR)/ptxas.log\n"
                             "@echo $(IMPL) $(CUDA_ARCH) > $(BUILD_DIR)/args")
    result = build.build(lab, "reference", tmp_path / "b", arch="80")
    assert result.outcome == "ok", result.message
    assert len(result.kernels) == 8
    assert (tmp_path / "b" / "args").read_text().split() == ["reference", "80"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_parser_reads_what_this_nvcc_writes(tmp_path):
    shutil.copy(DATA / "kernels_shared.cu", tmp_path / "k.cu")
    done = subprocess.run([NVCC, "-Xptxas", "-v", "-c", "k.cu", "-o", "k.o", "-arch=sm_90"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    kernels = {k.short_name: k for k in build.parse_ptxas_log(done.stderr + done.stdout)}
    assert {"plain", "tiled", "dyn", "spill"} <= set(kernels)
    assert kernels["tiled"].smem_bytes == 1040 and kernels["tiled"].registers > 0
    assert kernels["plain"].smem_bytes == 0


# ---------------------------------------------------------------- what a student reads after a failed build
# Logs as lab.mk's build writes them (recorded with nvcc 13 and GNU ld), with {K} the kit, {B} the
# build directory and {S} the folder of the student's kernel.cu.

LINK_LOG = """\
python3 {K}/grader/grade.py config {K}/labs/01-naive-5pt/lab.json > {B}/lab_config.h.tmp && mv {B}/lab_config.h.tmp {B}/lab_config.h
cc -std=c11 -O2 -g -Wall -Wextra -fopenmp -I{K}/grader/include -I{B} -c {K}/labs/01-naive-5pt/check_01.c -o {B}/check_01.o
cc -std=c11 -O2 -g -Wall -Wextra -fopenmp -I{K}/grader/include -I{B} -c {K}/grader/harness/kinds/stencil2d_sweep.c -o {B}/kind_stencil2d_sweep.o
nvcc kernel.cu ({S})
{S}/kernel.cu(2): warning #177-D: variable "unused" was declared but never referenced
ar rcs {K}/build/harness/sm90/libharness.a {K}/build/harness/sm90/errors.o
/usr/local/cuda/bin/nvcc -gencode arch=compute_90,code=sm_90 -o {B}/check {B}/check_01.o {B}/kind_stencil2d_sweep.o {B}/kernel.o {K}/build/harness/sm90/libharness.a -lcheck_pic
/usr/bin/ld: {B}/kind_stencil2d_sweep.o: in function `launch':
{K}/grader/harness/kinds/stencil2d_sweep.c:9: undefined reference to `stencil2d_sweep'
collect2: error: ld returned 1 exit status
make: *** [../../grader/lab.mk:213: {B}/check] Error 1
"""

NVCC_ERRORS = """\
{S}/kernel.cu(2): error: identifier "oops" is undefined
  __attribute__((global)) void k(float *o) { o[0] = oops; }
                                                    ^

{S}/kernel.cu(3): error: expected a ";"
  extern "C" void stencil2d_sweep(...) { k<<<1,1,0,stream>>>(d_out) }
                                                                     ^

2 errors detected in the compilation of "{S}/kernel.cu".
"""

COMPILE_LOG = """\
cc -std=c11 -O2 -g -Wall -Wextra -fopenmp -I{K}/grader/include -I{B} -c {K}/grader/harness/lab_driver.c -o {B}/lab_driver.o
nvcc kernel.cu ({S})
""" + NVCC_ERRORS + """\
make: *** [../../grader/lab.mk:185: {B}/kernel.o] Error 1
"""

HARNESS_WORDS = ("cc -std", "nvcc -gencode", "ar rcs", "grade.py config", "make: ***", "collect2")


def student_dirs(tmp_path, source_text=""):
    """(buildmessage.Paths of a kit, build directory and student folder under tmp_path, a filler of {K} {B} {S})."""
    kit, build_dir, folder = tmp_path / "kit", tmp_path / "build" / "01-naive-5pt", tmp_path / "class" / "alice"
    for d in (kit, build_dir, folder):
        d.mkdir(parents=True)
    (folder / "kernel.cu").write_text(source_text)
    where = buildmessage.Paths(folder / "kernel.cu", build_dir, kit)
    return where, lambda log: log.replace("{K}", str(kit)).replace("{B}", str(build_dir)).replace("{S}", str(folder))


def assert_for_the_student(message, tmp_path):
    """No harness command, no make bookkeeping, no path of the instructor's."""
    assert message.strip()
    for word in HARNESS_WORDS:
        assert word not in message, word
    assert str(tmp_path) not in message and "/tmp/" not in message


def test_missing_launcher_says_what_to_define(tmp_path):
    where, fill = student_dirs(tmp_path, "")
    message = buildmessage.failure_message(fill(LINK_LOG), where, ("stencil2d_sweep",),
                                    KIT_HEADER)
    lines = message.splitlines()
    assert lines[0] == ('kernel.cu must define extern "C" void stencil2d_sweep(const float *d_in, float *d_out, '
                        'int nx, int ny, stencil2d_coeffs c, cudaStream_t stream)')
    assert "grader/include/stencil_lab.h" in lines[1] and "(kernel.cu is empty)" in message
    assert "undefined reference" not in message and "warning #177" not in message     # only the link's lines
    assert_for_the_student(message, tmp_path)


def test_two_missing_launchers_each_get_their_declaration(tmp_path):
    where, fill = student_dirs(tmp_path, "// nothing yet\n")
    log = fill(LINK_LOG).replace("`stencil2d_sweep'", "`residual_norm2'") + \
        "/usr/bin/ld: x.o: in function `f':\nx.c:3: undefined reference to `jacobi_sweep'\n"
    message = buildmessage.failure_message(log, where, ("residual_norm2", "jacobi_sweep"), KIT_HEADER)
    musts = [line for line in message.splitlines() if " must define " in line]
    assert musts == ['kernel.cu must define extern "C" void residual_norm2(const float *d_u, const float *d_f, '
                     'int nx, int ny, float h, double *d_result, cudaStream_t stream)',
                     'kernel.cu must define extern "C" void jacobi_sweep(const float *d_u, float *d_unew, '
                     'const float *d_f, int nx, int ny, float h, cudaStream_t stream)']
    assert "is empty" not in message
    assert_for_the_student(message, tmp_path)


@pytest.mark.skipif(not (shutil.which("c++") and shutil.which("nm") and shutil.which("c++filt")),
                    reason="c++, nm or c++filt (binutils) not installed")
def test_launcher_with_other_parameters_is_named(tmp_path):
    """A launcher defined with C++ linkage and other parameters: the message names what was defined."""
    where, fill = student_dirs(tmp_path, "void stencil2d_sweep(const float *, float *, int, int) {}\n")
    shutil.copy(where.source, tmp_path / "k.cpp")
    done = subprocess.run(["c++", "-c", str(tmp_path / "k.cpp"), "-o", str(where.build_dir / "kernel.o")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    message = buildmessage.failure_message(fill(LINK_LOG), where, ("stencil2d_sweep",), KIT_HEADER)
    assert "kernel.cu defines stencil2d_sweep(float const*, float*, int, int) with C++ linkage" in message
    assert_for_the_student(message, tmp_path)


def test_other_link_errors_point_at_the_students_file(tmp_path):
    where, fill = student_dirs(tmp_path, "int helper(int);\n")
    log = fill(LINK_LOG).replace(
        fill("/usr/bin/ld: {B}/kind_stencil2d_sweep.o: in function `launch':\n"
             "{K}/grader/harness/kinds/stencil2d_sweep.c:9: undefined reference to `stencil2d_sweep'\n"),
        f"/usr/bin/ld: {where.build_dir}/kernel.o: in function `stencil2d_sweep':\n"
        "tmpxft_000072d0_00000000-6_kernel.cudafe1.cpp:(.text+0x13): undefined reference to `helper(int)'\n")
    message = buildmessage.failure_message(log, where, ("stencil2d_sweep",), KIT_HEADER)
    assert message.splitlines() == ["/usr/bin/ld: kernel.o: in function `stencil2d_sweep':",
                                    "kernel.cu: undefined reference to `helper(int)'"]


def test_compile_errors_are_nvccs_own_about_the_students_file(tmp_path):
    where, fill = student_dirs(tmp_path, "...")
    (where.build_dir / "nvcc.log").write_text(fill(NVCC_ERRORS))
    message = buildmessage.failure_message(fill(COMPILE_LOG), where, ("stencil2d_sweep",), KIT_HEADER,
                                    fresh_since=time.time() - 1)
    lines = message.splitlines()
    assert lines[0] == 'kernel.cu(2): error: identifier "oops" is undefined'
    assert lines[-1] == '2 errors detected in the compilation of "kernel.cu".'
    assert_for_the_student(message, tmp_path)


def test_a_stale_nvcc_log_is_not_taken_for_this_builds(tmp_path):
    where, fill = student_dirs(tmp_path, "...")
    (where.build_dir / "nvcc.log").write_text("kernel.cu(9): error: from an earlier build\n")
    message = buildmessage.failure_message(fill(COMPILE_LOG), where, (), KIT_HEADER, fresh_since=time.time() + 60)
    assert "earlier build" not in message
    assert message.splitlines()[0] == 'kernel.cu(2): error: identifier "oops" is undefined'   # from make's output
    assert_for_the_student(message, tmp_path)


def test_many_errors_keep_the_first_and_say_how_many_more(tmp_path):
    where, fill = student_dirs(tmp_path, "...")
    errors = "".join(f"{{S}}/kernel.cu({i}): error: number {i}\n" for i in range(1, 101))
    (where.build_dir / "nvcc.log").write_text(fill(errors))
    message = buildmessage.failure_message(fill(COMPILE_LOG), where, (), KIT_HEADER, fresh_since=time.time() - 1)
    lines = message.splitlines()
    assert len(lines) == buildmessage.MESSAGE_LINES
    assert lines[0] == "kernel.cu(1): error: number 1" and lines[-1].startswith("... 71 more line(s)")


def test_control_bytes_are_escaped_and_long_lines_cut(tmp_path):
    where, fill = student_dirs(tmp_path, "...")
    noise = "kernel.cu:1:8: warning: null character(s) ignored \x00\x1b[2J\x7fELF" + "\x01" * 500
    message = buildmessage.failure_message(noise + "\nmake: *** [Makefile:3: build] Error 1\n", where, (), KIT_HEADER)
    (line,) = message.splitlines()
    assert "\\x00\\x1b[2J\\x7fELF\\x01" in line and len(line) == buildmessage.LINE_WIDTH and line.endswith(" ...")
    assert not any(ord(ch) < 32 for ch in line)


def test_kit_errors_are_kept_first(tmp_path):
    where, fill = student_dirs(tmp_path, "...")
    log = ("cc -c x.c -o x.o\nkit error: the Check unit-testing library is not installed\n"
           "make: *** [../../grader/lab.mk:175: require-check] Error 2\n")
    assert buildmessage.failure_message(log, where, (), KIT_HEADER) == \
        "kit error: the Check unit-testing library is not installed"


def test_paths_relative_to_the_students_file(tmp_path):
    where, fill = student_dirs(tmp_path)
    text = fill("{S}/kernel.cu(3): note: see {S}/helpers.cuh and {K}/grader/include/stencil_lab.h(44) "
                "and {B}/kernel.o and {B}/../other/x.o")
    temp = f"{tempfile.gettempdir()}/tmpxft_00_1-2_kernel.cudafe1.stub.c"
    assert where.relative(text + f" in {temp}:4") == (
        "kernel.cu(3): note: see helpers.cuh and grader/include/stencil_lab.h(44) and kernel.o and ../other/x.o"
        " in tmpxft_00_1-2_kernel.cudafe1.stub.c:4")


@pytest.mark.parametrize("line, command", [
    ("cc -std=c11 -O2 -c lab_driver.c -o lab_driver.o", True),
    ("/usr/bin/x86_64-linux-gnu-gcc-12 -c x.c", True),
    ("python3.11 /kit/grader/grade.py config lab.json > lab_config.h", True),
    ("ar rcs libharness.a errors.o", True),
    ("nvcc kernel.cu (starter)", True),                         # lab.mk's own progress line
    ("nvcc fatal   : Unsupported gpu architecture 'compute_20'", False),
    ("  cp = in[0];", False),                                   # a source line nvcc quotes
    ("/usr/bin/ld: kernel.o: in function `f':", False),
    ("ld: warning: creating DT_TEXTREL", False),
])
def test_command_lines_are_told_from_diagnostics(line, command):
    assert buildmessage.is_command(line) is command


def test_declaration_comes_from_the_header():
    assert buildmessage.declaration("stencil2d_run", KIT_HEADER) == (
        "float *stencil2d_run(float *d_a, float *d_b, int nx, int ny, stencil2d_coeffs c, int steps, "
        "cudaStream_t stream)")
    assert buildmessage.declaration("no_such_launcher", KIT_HEADER) is None


def test_lab_launchers_follow_the_labs_kind():
    assert buildmessage.lab_launchers(KIT_ROOT / "labs" / "01-naive-5pt") == ("stencil2d_sweep",)
    assert buildmessage.lab_launchers(KIT_ROOT / "labs" / "07-reduction-residual") == ("residual_norm2", "jacobi_sweep")
    assert buildmessage.lab_launchers(KIT_ROOT / "labs" / "no-such-lab") == ()


@needs_make
@pytest.mark.parametrize("content, said", [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8, "kernel.cu is not a text file: it holds NUL bytes"),
    ("__global__ void k() {}\n".encode("utf-16"), "it is UTF-16 text; save it as UTF-8"),
    ("//" + "x" * build.MAX_SOURCE_BYTES, "kernel.cu is 1.0 MB, over the 1 MiB a kernel.cu may have"),
], ids=["elf", "utf16", "over_1_mib"])
def test_a_kernel_make_should_not_see_is_refused_in_one_line_before_make(tmp_path, content, said):
    lab = make_lab(tmp_path, "@touch $(BUILD_DIR)/make-ran")
    result = build.build(lab, str(student(tmp_path, content)), tmp_path / "b")
    assert result.outcome == "compile_error"
    assert said in result.message and len(result.message.splitlines()) == 1
    assert not (tmp_path / "b" / "make-ran").exists()
    assert "make was not run" in (tmp_path / "b" / build.BUILD_LOG).read_text()


@needs_make
def test_make_gets_only_the_graders_paths(tmp_path):
    """A student's folder name never reaches make's shell: kernel.cu is copied to BUILD_DIR/src/<lab>/, IMPL= that."""
    lab = make_lab(tmp_path, '@echo "$(IMPL)" > $(BUILD_DIR)/impl; test -f $(IMPL)/lab/kernel.cu')
    sub = student(tmp_path, GOOD_KERNEL, "o'brien \"x\" $(touch PWNED) `touch PWNED`; -rf")
    result = build.build(lab, str(sub), tmp_path / "b")
    assert result.ok, result.message
    staged = tmp_path / "b" / "src" / "lab" / "kernel.cu"
    assert staged.read_text() == GOOD_KERNEL
    assert result.command[5] == f"IMPL={(tmp_path / 'b' / 'src').resolve()}"
    assert not any("brien" in word for word in result.command) and not list(tmp_path.rglob("PWNED"))
    mtime = staged.stat().st_mtime_ns                      # the same file again: no new copy, no rebuild
    assert build.build(lab, str(sub), tmp_path / "b").ok and staged.stat().st_mtime_ns == mtime


@needs_make
def test_a_folder_make_cannot_take_is_a_kit_error_not_a_grade(tmp_path):
    lab = make_lab(tmp_path, "@touch $(BUILD_DIR)/make-ran")
    result = build.build(lab, "starter", tmp_path / "build dir")
    assert result.outcome == "kit_error" and result.message.startswith("kit error: the build directory ")
    assert "holds a space, which make cannot take" in result.message
    assert not (tmp_path / "build dir" / "make-ran").exists()
    assert build.make_path_problem(Path("/tmp/a b")) == "holds a space"
    assert build.make_path_problem(Path("/tmp/x$y")) == "holds the character '$'"
    assert build.make_path_problem(Path("/tmp/x,y")) == "holds the character ','"
    assert build.make_path_problem(Path("/tmp/Jos\u00e9_\u738b/ok-1.2+x@y")) is None


@needs_make
def test_the_whole_make_output_is_kept_in_build_log(tmp_path):
    lab = make_lab(tmp_path, "cc -c harness.c -o harness.o || true\n@echo 'kernel.cu(1): error: bad' >&2; exit 1")
    result = build.build(lab, str(student(tmp_path, "bad\n")), tmp_path / "b")
    log = (tmp_path / "b" / build.BUILD_LOG).read_text()
    # "make: ***", or "make[N]: ***" when this runs under another make (make test)
    failed_at = re.search(r"^make(\[\d+\])?: \*\*\*", log, re.MULTILINE).start()
    assert log.index("cc -c harness.c") < log.index("kernel.cu(1): error: bad") < failed_at
    assert result.message.splitlines()[-1] == "kernel.cu(1): error: bad" and "cc -c" not in result.message


def test_template_kernels_are_told_apart():
    log = "".join(f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
                  f"ptxas info    : Used 40 registers, used 1 barriers, 6144 bytes smem\n" for name in TEMPLATES)
    kernels = build.parse_ptxas_log(log)
    labels = names.kernel_labels([k.name for k in kernels])
    assert len(set(labels.values())) == 2
    if shutil.which("c++filt"):
        assert [labels[n] for n in TEMPLATES] == ["stencil3d_zmarch_kernel<false>", "stencil3d_zmarch_kernel<true>"]
    assert names.kernel_labels(["_Z5tiledPKfPfi", "plain"]) == {"_Z5tiledPKfPfi": "tiled", "plain": "plain"}


@pytest.mark.skipif(not shutil.which("c++filt"), reason="c++filt (binutils) not installed")
def test_overloads_keep_their_parameters():
    assert names.kernel_labels(["_Z1kPf", "_Z1kPd", "_Z1gPf"]) == {"_Z1kPf": "k(float*)", "_Z1kPd": "k(double*)",
                                                                   "_Z1gPf": "g"}


def test_report_lists_each_template_instance(fake_kit, tmp_path):
    (fake_kit.fake / "ptxas.log").write_text(
        "".join(f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
                f"ptxas info    : Used 40 registers, 6144 bytes smem\n" for name in TEMPLATES))
    folder = fake_kit.submission("s")
    data = report.to_dict(pipeline.grade_lab(fake_kit.lab_dir, str(folder), tmp_path / "b"))
    kernel_lines = [line for line in report.render_text(data).splitlines() if line.strip().startswith("kernel ")]
    assert len(kernel_lines) == 2 and len(set(kernel_lines)) == 2


def test_after_a_failed_build_the_report_says_what_to_do(fake_kit, tmp_path):
    folder = fake_kit.submission("s", GOOD_KERNEL + "COMPILE_ERROR\n")
    data = report.to_dict(pipeline.grade_lab(fake_kit.lab_dir, str(folder), tmp_path / "b"))
    text = report.render_text(data)
    first = text.splitlines()[0]
    assert first.startswith("seed: none drawn: your file did not build") and "run again with" not in first
    assert 'kernel.cu(3): error: identifier "oops" is undefined' in text
    gradescope = gradescope_file.tests(data)[0]["output"]
    assert 'kernel.cu(3): error: identifier "oops" is undefined' in gradescope
    assert_for_the_student(gradescope, tmp_path)
    assert "build.log" in text and (tmp_path / "b" / build.BUILD_LOG).is_file()


NEEDS_TOOLCHAIN = not (NVCC and shutil.which("make") and HAVE_CHECK)


@pytest.mark.skipif(NEEDS_TOOLCHAIN, reason="nvcc, make or the Check library (pkg-config check) not installed")
def test_an_empty_kernel_cu_of_lab_1_is_told_what_to_define(tmp_path):
    """The real lab 1 build (nvcc and the linker, no GPU)."""
    result = build.build(KIT_ROOT / "labs" / "01-naive-5pt", str(student(tmp_path, "", "alice")), tmp_path / "b",
                         timeout_s=600)
    if result.outcome == "kit_error":
        pytest.skip(result.message)
    assert result.outcome == "compile_error"
    assert result.message.startswith('kernel.cu must define extern "C" void stencil2d_sweep(const float *d_in, ')
    assert_for_the_student(result.message, tmp_path)
    assert "undefined reference to `stencil2d_sweep'" in (tmp_path / "b" / build.BUILD_LOG).read_text()


@pytest.mark.skipif(NEEDS_TOOLCHAIN, reason="nvcc, make or the Check library (pkg-config check) not installed")
def test_builds_of_one_lab_at_once_share_its_part_of_the_harness(tmp_path):
    """The lab's objects, which no kernel.cu changes, are built once per toolkit and architecture beside the harness
    library: four builds of lab 2 started at once, with none of them there yet, all link (each file is renamed into
    place whole), and each build directory holds copies of them and its own kernel.o only compiled from its file."""
    lab = KIT_ROOT / "labs" / "02-shared-tiling"
    arch = ["CUDA_ARCH=80"]                                     # a harness folder of its own for this test
    assert worker.prepare_harness([lab, lab], "80") == []      # what a class does first, once per lab
    shared = [d for d in (KIT_ROOT / "build" / "harness").glob("*-sm80/labs/02-shared-tiling")]
    assert len(shared) == 1 and (shared[0] / "check_runner.o").is_file()
    shutil.rmtree(shared[0])
    builds = [subprocess.Popen(["make", "-s", "-C", str(lab), "build", "IMPL=starter", f"BUILD_DIR={tmp_path / str(i)}",
                                *arch], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(4)]
    for i, run in enumerate(builds):
        out, _ = run.communicate(timeout=900)
        assert run.returncode == 0, out
        assert (tmp_path / str(i) / "check").is_file() and (tmp_path / str(i) / "bench").is_file()
        copies = {o.name for o in (tmp_path / str(i)).glob("*.o")} - {"kernel.o"}
        assert copies == {o.name for o in shared[0].glob("*.o")} and "check_runner.o" in copies
    assert not list(shared[0].glob("*.tmp*")) and (shared[0] / "lab_config.h").is_file()
    # The copies follow the flags: DEBUG=1 into the same build folder and back takes the plain objects again,
    # even though those are older than the debug copies (the bench's object differs between the two).
    for debug in (["DEBUG=1"], []):
        again = subprocess.run(["make", "-s", "-C", str(lab), "build", "IMPL=starter", f"BUILD_DIR={tmp_path / '0'}",
                                *arch, *debug], capture_output=True, text=True, timeout=900)
        assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "0" / "bench.o").read_bytes() == (shared[0] / "bench.o").read_bytes()


# ---------------------------------------------------------------- common mistakes get a hint

PRINTF_KERNEL = '__global__ void k(const float *a) { printf("a[0] = %f\\n", a[0]); }\n'


@needs_make
def test_printf_without_its_header_gets_a_hint(tmp_path):
    lab = make_lab(tmp_path, "@echo 'kernel.cu(1): error: identifier \"printf\" is undefined' >&2; exit 1")
    result = build.build(lab, "starter", tmp_path / "b")
    assert result.outcome == "compile_error"
    assert result.message.splitlines()[-1] == buildmessage.PRINTF_HINT
    assert "#include <cstdio>" in buildmessage.PRINTF_HINT and "GPU is allowed" in buildmessage.PRINTF_HINT
    assert buildmessage.compiler_hints('kernel.cu(2): error: identifier "oops" is undefined') == []


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_the_printf_hint_matches_what_this_nvcc_says(tmp_path):
    (tmp_path / "kernel.cu").write_text(PRINTF_KERNEL)
    done = subprocess.run([NVCC, "-c", "kernel.cu", "-o", "kernel.o"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode != 0
    assert buildmessage.compiler_hints(done.stdout + done.stderr) == [buildmessage.PRINTF_HINT]
    (tmp_path / "kernel.cu").write_text("#include <cstdio>\n" + PRINTF_KERNEL)
    done = subprocess.run([NVCC, "-c", "kernel.cu", "-o", "kernel.o"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr                   # with the header, a kernel's printf builds


@needs_make
@pytest.mark.parametrize("given, digits", [("sm_90", "90"), ("9.0", "90"), ("compute_8.0", "compute_80"), ("x", "90"),
                                           ("90", None), ("80 90", None), ("90a", None), ("compute_80", None)])
def test_make_refuses_a_cuda_arch_not_in_digits_naming_the_digits(given, digits):
    """make CUDA_ARCH=sm_90 stops before any build, saying what to write; digits (compute_NN: PTX alone) pass."""
    done = subprocess.run(["make", "-s", "print-build-dir", f"CUDA_ARCH={given}"], cwd=KIT_ROOT / "labs" / "01-naive-5pt",
                          capture_output=True, text=True, timeout=60)
    if digits is None:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 2 and not done.stdout
        assert f"write the compute capability as digits, CUDA_ARCH={digits} " in done.stderr


def test_grade_py_arch_takes_digits_only():
    from stencil_grader.base import cliargs
    assert cliargs.arch("90") == "90" and cliargs.arch("80 90") == "80 90" and cliargs.arch("90a") == "90a"
    assert cliargs.arch("compute_75") == "compute_75"                    # PTX alone
    for bad, hint in (("sm_90", "--arch 90 "), ("8.6", "--arch 86 "), ("gpu", "--arch 90 ")):
        with pytest.raises(Exception, match=hint):
            cliargs.arch(bad)
