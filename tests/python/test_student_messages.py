"""What a new student is told after real builds (no GPU needed): next steps, notes, make help."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import KIT_ROOT, run_grade
from stencil_grader.base import toolkit
from stencil_grader.grading import source
from stencil_grader.grading.report import next_step

needs_nvcc = pytest.mark.skipif(not toolkit.find_nvcc() or shutil.which("pkg-config") is None
                                or subprocess.run(["pkg-config", "--exists", "check"]).returncode != 0,
                                reason="needs nvcc and the Check library to build a lab")


def _grade(lab: str, kernel: str, tmp_path) -> dict:
    folder = tmp_path / "mine" / lab
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(kernel)
    out = tmp_path / "report.json"
    run_grade("lab", lab, "--impl", tmp_path / "mine", "--build-dir", tmp_path / "build", "--json", out,
              "--no-preflight", timeout=600)
    return json.loads(out.read_text())


@needs_nvcc
def test_a_static_failure_without_a_gpu_is_named_in_the_next_step(tmp_path):
    """Lab 3's dividing starter: the closing line names the static failure."""
    report = _grade("03-boundary-neat", (KIT_ROOT / "starter/03-boundary-neat/kernel.cu").read_text(), tmp_path)
    assert any(s["name"] == "no div/rem" and s["status"] == "fail" for s in report["static"])
    tone, headline, detail = next_step(report)
    assert "passed the static checks" not in detail
    assert "a static check failed (no div/rem:" in detail


def test_the_next_step_of_a_synthetic_report_names_every_failed_check():
    report = {"verdict": "not_measured", "build": {"outcome": "ok"}, "gpu": {"status": "no_gpu", "message": "no GPU"},
              "static": [{"name": "shared memory", "status": "fail", "message": "no kernel reads a tile"},
                         {"name": "notes", "status": "warn", "message": "1 thing", "details": ["line 3: a block"]}]}
    detail = next_step(report)[2]
    assert "a static check failed (shared memory: no kernel reads a tile)" in detail
    assert "Note: line 3: a block." in detail


@needs_nvcc
def test_a_host_printf_gets_one_verdict_and_the_untouched_starter_a_note(tmp_path):
    kernel = (KIT_ROOT / "starter/01-naive-5pt/kernel.cu").read_text()
    kernel = "#include <cstdio>\n" + kernel.replace("cudaStream_t stream)\n{", 'cudaStream_t stream)\n{\n    printf("hi\\n");', 1)
    assert 'printf("hi' in kernel
    report = _grade("01-naive-5pt", kernel, tmp_path)
    checks = {s["name"]: s for s in report["static"]}
    assert checks["linked symbols"]["status"] == "fail" and "printf" in " ".join(checks["linked symbols"]["details"])
    said = checks["source rules"]["message"]
    assert "none" not in said and "forbidden calls" not in json.dumps(report["static"])
    assert checks["notes"]["status"] == "warn" and "TODO(lab01) still on lines" in checks["notes"]["details"][0]


def test_a_constant_block_over_1024_threads_is_a_note(tmp_path):
    src = tmp_path / "kernel.cu"
    src.write_text("#define BX 64\nconstexpr int BY = 32;\n__global__ void k() {}\n"
                   "void go(cudaStream_t s) {\n  dim3 block(BX, BY);\n  k<<<1, block, 0, s>>>();\n"
                   "  k<<<1, dim3(32, 8), 0, s>>>();\n  k<<<1, 2048>>>();\n}\n")
    note = source.check_notes(src)
    assert note.status == "warn" and note.severity == "note"
    assert [d.split(":")[0] for d in note.details] == ["line 6", "line 8"]
    assert "a block of 2048 threads" in note.details[0]
    src.write_text("__global__ void k() {}\nvoid go(int n) { k<<<1, n>>>(); k<<<1, 1024>>>(); }\n")
    assert source.check_notes(src) is None


@pytest.mark.parametrize("name", ["Kernel.cu", "kernel.cu.txt", "kernel (1).cu"])
def test_a_misnamed_kernel_cu_is_named_by_make_check(tmp_path, name):
    folder = tmp_path / "mine" / "01-naive-5pt"
    folder.mkdir(parents=True)
    (folder / name).write_text("// mine\n")
    done = subprocess.run(["make", "--no-print-directory", "-C", str(KIT_ROOT / "labs/01-naive-5pt"), "check",
                           f"IMPL={tmp_path / 'mine'}"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "no kernel.cu found" in done.stderr and f"found {name}: the file must be named kernel.cu" in done.stderr


def test_make_help_in_a_lab_names_every_target_and_variable_the_handouts_use():
    done = subprocess.run(["make", "--no-print-directory", "-C", str(KIT_ROOT / "labs/01-naive-5pt"), "help"],
                          capture_output=True, text=True, timeout=60)
    assert "make print-build-dir" in done.stdout and "BUILD_DIR=" in done.stdout


@needs_nvcc
def test_a_no_gpu_report_says_cuda_s_message_once(tmp_path):
    done = run_grade("lab", "01-naive-5pt", "--impl", "starter", "--build-dir", tmp_path / "b", "--no-preflight",
                     timeout=600)
    if "no GPU" not in done.stdout:
        pytest.skip("a GPU is here: the run was measured")
    assert done.stdout.count("CUDA says") <= 1 and "not measured (no GPU, see next)" in done.stdout


def test_the_sweep_counts_of_lab_7_are_rounded_up():
    """ln R / ln cos(pi h) sweeps: 593.4 at n = 17 means 594 reach R = 1e-5."""
    import math
    import re
    text = (KIT_ROOT / "handouts/07-reduction-residual.md").read_text()
    for n in (17, 33, 65, 129, 513):
        row = re.search(rf"^\| {n} \| 1/{n - 1} \| [0-9.]+ \| ([0-9,]+) \|", text, re.MULTILINE)
        assert row, n
        need = math.log(1e-5) / math.log(math.cos(math.pi / (n - 1)))
        assert int(row.group(1).replace(",", "")) == math.ceil(need), (n, need)


def test_lab_7_questions_name_only_what_the_student_kit_has():
    text = (KIT_ROOT / "handouts/07-reduction-residual.md").read_text()
    assert "atomic_add_double" not in text


def test_the_reduction_tree_calls_last_only_the_last_ticket():
    svg = (KIT_ROOT / "handouts/img/07-reduction-tree.svg").read_text()
    assert "..." not in re.sub(r"\[2\] \+ \.\.\.", "", svg.replace("&#x2E;", "."))
    assert "the tickets run 0 to 5; the block that draws ticket 5, the last (here block 2)" in svg


def test_every_handout_states_its_lab_s_rules_from_lab_json():
    """Each handout's rules block is generated from its lab.json's constraints."""
    from stencil_grader.instructor import figures
    for lab_json in sorted((KIT_ROOT / "labs").glob("*/lab.json")):
        number = lab_json.parent.name[:2]
        handout = (KIT_ROOT / "handouts" / f"{lab_json.parent.name}.md").read_text()
        block = re.search(rf"<!-- figures lab/{number} rules -->\n(.*?)<!-- /figures -->", handout, re.S)
        assert block and block.group(1) == figures.rules_text(number, KIT_ROOT), number
        constraints = json.loads(lab_json.read_text())["constraints"]
        for rule in (constraints.get("shared_tile") or {}, constraints.get("grid_storage") or {}):
            if rule:
                assert " ".join(rule["rule"].split()) in " ".join(block.group(1).split()), number
    lab2 = (KIT_ROOT / "handouts/02-shared-tiling.md").read_text()
    assert "requires at least one kernel or\n  device function to declare shared memory" not in lab2


def test_the_notebook_tells_a_new_student_what_colab_and_kaggle_do():
    """The notebook says how Colab and Kaggle behave: wiped files, Python, uploads, apt, no warnings."""
    cells = json.loads((KIT_ROOT / "notebooks/colab.ipynb").read_text())["cells"]
    text = "\n".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in cells)
    assert "File > Upload notebook" in text and "File > Import Notebook" in text
    assert "is wiped when the" in text and "drive.mount" in text
    assert "sys.version_info < (3, 11)" in text
    assert "a newer {archives[-1]} was uploaded" in text and "key=os.path.getmtime" in text
    assert "could not install the Check library (no network?" in text and '"pkg-config"], env=env, check=True)' not in text
    assert 'report.get("not_measured")' not in text and 'removeprefix("not measured: ")' in text
    assert "display(HTML('<div><iframe" in text
