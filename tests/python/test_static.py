"""static.py: forbidden calls in code (not in comments or strings) and the rules on machine code."""

import shutil
import subprocess

import pytest

from conftest import DATA, fake_spec
from stencil_grader.grading import names, sass, source, static
from stencil_grader.student.profile import access


def found(src):
    return [(line, what) for line, what, _ in source.lexical_findings(src)]


@pytest.mark.parametrize("src, expected", [
    ("#include <cuda_runtime.h>\n"
     "void f(float *d, float *h, cudaStream_t s) {\n"
     "    cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost);\n"
     "    cudaMemcpyAsync(h, d, 4, cudaMemcpyDefault, s);\n"
     "    cudaMemcpyAsync(d, d + 4, 4, cudaMemcpyDeviceToDevice, s);\n"
     "    auto k = cudaMemcpyHostToHost;\n"
     "}\n", [(3, "cudaMemcpyDeviceToHost"), (4, "cudaMemcpyDefault"), (6, "cudaMemcpyHostToHost")]),
    # harmless names: the compiled object decides (symbols.py), never a lexical prefix
    ("const int cpu_count = 0;\n"
     "static int harness_like = 1, my_malloc = 2, systems = 3;\n"
     "void g(float *d_out, cudaStream_t stream) {\n"
     "  cudaMemsetAsync(d_out, 0, 4, stream); cudaGetLastError();\n"
     "  int fork = 0, getenv_count = 0; (void)fork;\n"
     "  kernel<<<1, 1, 0, stream>>>(d_out);\n}\n", []),
    # comments and literals do not count
    ('// cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);\n'
     '/* cudaMemcpyDefault\n   cudaMemcpyAsync(h, d, 4, 2, s); */\n'
     'const char *s = "cudaMemcpyDeviceToHost";\n'
     "char q = '\\''; char c = 'm';  /* cudaMemcpyHostToHost */\n"
     'const char *raw = R"x(cudaMemcpyDefault("HOME") )" popen)x";\n'
     'int big = 1\'000\'000; // cudaMemcpyDefault\n'
     'void ok() {}\n', []),
    # code after a comment or a string still counts
    ('/* a comment */ auto a = cudaMemcpyDefault;\n'
     'puts("// not a comment"); auto b = cudaMemcpyDeviceToHost;\n'
     "int big = 1'000; auto c = cudaMemcpyHostToHost;\n",
     [(1, "cudaMemcpyDefault"), (2, "cudaMemcpyDeviceToHost"), (3, "cudaMemcpyHostToHost")]),
    ("/*\n\n\n*/\n\"a\\\nb\"; auto k = cudaMemcpyDefault;\n", [(6, "cudaMemcpyDefault")]),   # lines kept
    ('#include "stencil_lab.h"\n// #include "harness.h"\n#  include "../../grader/include/harness.h"\n'
     '#include <harness.h>\n', [(3, '#include "../../grader/include/harness.h"'), (4, "#include <harness.h>")]),
    ("#define cudaMemcpyDeviceToDevice cudaMemcpyDeviceToHost\n",
     [(1, "#define cudaMemcpyDeviceToDevice"), (1, "cudaMemcpyDeviceToHost")]),
], ids=["host_copies", "harmless_names", "comments_and_literals", "code_after_comments", "line_numbers",
        "harness_include", "define"])
def test_lexical_findings_in_code_only_with_their_lines(src, expected):
    assert found(src) == expected


def test_an_async_copy_must_name_its_direction():
    src = ("void f(float *d, float *h, cudaStream_t s) {\n"
           "    cudaMemcpyAsync(h, d, 4, (cudaMemcpyKind)2, s);\n"
           "    cudaMemcpy2DAsync(d, 4, d, 4, 4, 4,\n"
           "                      cudaMemcpyDeviceToDevice, s);\n"
           "    cudaMemcpyToSymbolAsync(coef, &c, sizeof c, 0, cudaMemcpyHostToDevice, s);\n"
           "}\n")
    assert found(src) == [(2, "cudaMemcpyAsync")]
    (reason,) = [r for _, _, r in source.lexical_findings(src)]
    assert "must name its direction" in reason


def test_check_source_reports_each_use(tmp_path):
    src = tmp_path / "kernel.cu"
    src.write_text("void f() {\n  cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost);\n}\n")
    result = source.check_source(src)
    assert (result.status, result.severity) == ("fail", "signal")         # the audit judges the copy
    assert result.details[0].startswith("line 2: cudaMemcpyDeviceToHost: a copy to or from host memory")
    src.write_text('#include "harness.h"\n' + src.read_text())
    assert source.check_source(src).severity == "forbidden"
    src.write_text("// cudaMemcpyDeviceToHost\nconst int cpu_count = 0;\n")
    assert source.check_source(src).status == "pass"
    assert source.check_source(tmp_path / "missing.cu").status == "fail"


# ---------------------------------------------------------------- the profile's PTX reader

def test_ptx_functions_and_prototypes():
    functions = access.parse_ptx((DATA / "kernels_shared.ptx").read_text())
    assert [(f.name, f.kind) for f in functions] == [
        ("_Z5plainPKfPfi", "entry"), ("_Z5tiledPKfPfi", "entry"), ("_Z3dynPKfPfi", "entry"),
        ("_Z5spillPfi", "entry")]
    ptx = (".extern .func  (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n"
           "\t.param .b64 vprintf_param_1\n)\n;\n"
           ".visible .entry k()\n{\n\tdiv.u64 \t%rd3, %rd1, %rd2; // a comment\n}\n")
    assert [(f.name, f.lines) for f in access.parse_ptx(ptx)] == [("k", [(9, "\tdiv.u64 \t%rd3, %rd1, %rd2; "), (10, "}")])]


def spec_with(tmp_path, **constraints):
    return fake_spec(tmp_path, **{f"constraints__{key}": value for key, value in constraints.items()})


PROGRAM = sass.parse_sass((DATA / "program.sass").read_text(), "/tmp/data/harness")   # where it was built


@pytest.fixture
def disassembled(monkeypatch):
    """The static stage reads program.sass as the bench program's machine code."""
    monkeypatch.setattr(sass, "student_code", lambda build_dir: PROGRAM)


def test_no_div_rem_is_judged_on_the_machine_code(tmp_path, disassembled):
    """Integer division, from C or inline PTX, on every architecture: the student's, not the harness's."""
    (check,) = sass.check_machine_code(spec_with(tmp_path, no_div_rem=True), tmp_path)
    assert (check.name, check.status, check.severity) == ("no div/rem", "fail", "constraint")
    assert "c_divide, sm_90 offset 0x0110: I2F.U32.RP" in check.details
    assert "c_divide, sm_90 offset 0x04d0: I2F.U64.RP" in check.details
    found = {d.split(",")[0] for d in check.details}
    assert found == {"c_divide", "ptx_two_per_line", "ptx_brace_in_comment"}
    assert {d.split(", ")[1].split()[0] for d in check.details} == {"sm_80", "sm_90"}


def test_machine_code_without_division_passes(tmp_path, monkeypatch):
    clean = {a: {n: f for n, f in fns.items() if not sass.integer_divisions(f)} for a, fns in PROGRAM.items()}
    monkeypatch.setattr(sass, "student_code", lambda build_dir: clean)
    (check,) = sass.check_machine_code(spec_with(tmp_path, no_div_rem=True), tmp_path)
    assert check.status == "pass"


def test_a_program_without_machine_code_fails_the_rule_it_cannot_judge(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "student_code", lambda build_dir: {})
    checks = sass.check_machine_code(spec_with(tmp_path, shared_memory=True, no_div_rem=True), tmp_path)
    assert [(c.name, c.status) for c in checks] == [("no div/rem", "fail"), ("shared memory", "fail")]
    assert "no machine code of kernel.cu" in checks[0].message


def test_shared_memory_is_a_first_signal_never_the_verdict(tmp_path, disassembled, monkeypatch):
    """Shared memory in the machine code is an early signal; the launch audit gives the verdict."""
    spec = spec_with(tmp_path, shared_memory=True)
    (check,) = sass.check_machine_code(spec, tmp_path)
    assert check.status == "pass" and check.details == ["kernel tile_read", "kernel tile_write_only",
                                                        "kernel weights_only"]
    monkeypatch.setattr(sass, "student_code", lambda build_dir: {90: {"_Z5plainPKfPfi": PROGRAM[90]["_Z5plainPKfPfi"]}})
    (check,) = sass.check_machine_code(spec, tmp_path)
    assert (check.status, check.severity) == ("fail", "signal") and "launch audit" in check.message
    assert not static.StaticResult([check]).constraint_failed


def test_no_constraints_no_disassembly(tmp_path):
    assert sass.check_machine_code(spec_with(tmp_path), tmp_path) == []


def test_a_missing_disassembler_is_the_graders_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "cuobjdump", lambda: None)
    with pytest.raises(sass.SassError, match="cuobjdump"):
        sass.student_code(tmp_path)


def _cuda_tools():
    nvcc = sass.find_nvcc()
    return nvcc, sass.cuobjdump()


@pytest.mark.skipif(not all(_cuda_tools()), reason="nvcc and cuobjdump not both installed")
def test_the_fixture_reads_as_this_toolkits_machine_code(tmp_path):
    """program.sass reads as this toolkit's build of kernels_sass.cu does."""
    nvcc, _ = _cuda_tools()
    (tmp_path / "src").mkdir()
    shutil.copy(DATA / "kernels_sass.cu", tmp_path / "src" / "kernels_sass.cu")
    (tmp_path / "main.cu").write_text("int main() { return 0; }\n")
    subprocess.run([nvcc, "-O3", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90", "-o", str(tmp_path / "bench"),
                    str(tmp_path / "src" / "kernels_sass.cu"), str(tmp_path / "main.cu")],
                   check=True, capture_output=True, timeout=300)
    fresh = sass.student_code(tmp_path)[90]
    for fns in (fresh, PROGRAM[90]):
        assert {n for n, f in fns.items() if sass.integer_divisions(f)} == {
            "_Z8c_dividePiii", "_Z16ptx_two_per_linePiii", "_Z20ptx_brace_in_commentPiii"}
        assert {n for n, f in fns.items() if sass.float_atomics(f)} == {"_Z13float_atomicsPKfPdPf", "_Z7cas_addPKfPd"}
        assert sass.widest_global_load(fns["_Z11float4_loadPK6float4Pf"]) == 16


@pytest.mark.skipif(not all(_cuda_tools()), reason="nvcc and cuobjdump not both installed")
def test_a_program_of_ptx_alone_is_judged_on_what_the_driver_compiles(tmp_path):
    """A PTX-only program is judged on ptxas's code for the GPU that ran; an older GPU gets none."""
    nvcc, _ = _cuda_tools()
    (tmp_path / "main.cu").write_text("int main() { return 0; }\n")
    subprocess.run([nvcc, "-O3", "-gencode", "arch=compute_75,code=compute_75", "-o", str(tmp_path / "bench"),
                    str(DATA / "kernels_sass.cu"), str(tmp_path / "main.cu")], check=True, capture_output=True,
                   timeout=300)
    for cc, arch in (("9.0", 90), (None, 75)):
        code = sass.student_code(tmp_path, cc)
        assert list(code) == [arch] and all(f.from_ptx for f in code[arch].values())
        assert {n for n, f in code[arch].items() if sass.integer_divisions(f)} == {
            "_Z8c_dividePiii", "_Z16ptx_two_per_linePiii", "_Z20ptx_brace_in_commentPiii"}
        kernels, elf = sass.for_device(code, cc or "7.5")
        assert kernels and "compiled by ptxas from the program's PTX" in elf
    kernels, elf = sass.for_device(sass.student_code(tmp_path, "7.0"), "7.0")
    assert not kernels and "CUDA_ARCH=70" in elf


def test_ptx_sections_leave_the_harness_out():
    text = ("Fatbin ptx code:\n================\narch = sm_75\nidentifier = /kit/grader/harness/device.cu\n"
            ".version 9.0\n.target sm_75\n"
            "Fatbin ptx code:\n================\narch = sm_80\ncompressed\nidentifier = /lab/kernel.cu\n"
            "ptxasOptions = -v\n\n//\n.version 9.0\n.target sm_80\n")
    assert sass.parse_ptx_sections(text, "/kit/grader/harness") == [(80, "//\n.version 9.0\n.target sm_80\n")]


def test_run_static_combines_object_source_and_machine_code(tmp_path, disassembled):
    """One stage, in the report's order: the object's symbols, the source, the machine code."""
    spec = spec_with(tmp_path, no_div_rem=True)
    src = tmp_path / "kernel.cu"
    src.write_text('#include "harness.h"\n')
    result = static.run_static(spec, src, tmp_path)
    assert result.forbidden and result.constraint_failed
    assert [c.name for c in result.checks] == ["linked symbols", "source rules", "no div/rem"]


def test_kernel_label_shows_integer_template_arguments():
    assert names.kernel_label("_Z24stencil3d_regtile_kernelILi4EEvPKfPfiiiii16stencil3d_coeffs") \
        == "stencil3d_regtile_kernel<4>"
    assert names.kernel_label("_Z3kA2ILi32ELi4ELb0EEvPKf") == "kA2<32, 4, 0>"
    assert names.kernel_label("_Z5tiledPKfPfi") == "tiled"
    assert names.kernel_label("stencil2d_kernel") == "stencil2d_kernel"
