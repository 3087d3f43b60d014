"""notebooks/colab.ipynb runs top to bottom in nbclient on the student kit (skipped without nbclient)."""

import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from conftest import HAVE_GPU, KIT_ROOT

NOTEBOOK = KIT_ROOT / "notebooks" / "colab.ipynb"
LABS = sorted(p.name for p in (KIT_ROOT / "labs").iterdir() if (p / "lab.json").is_file())


def load() -> dict:
    return json.loads(NOTEBOOK.read_text())


def text_of(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def test_the_notebook_is_nbformat_4_with_one_cell_per_lab():
    nb = load()
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and "source" in cell and "metadata" in cell
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None      # shipped clean
    code = [text_of(c) for c in nb["cells"] if c["cell_type"] == "code"]
    assert "nvidia-smi" in code[0] and "Runtime > Change runtime type" in code[0]
    assert "apt-get" in code[1] and '"check"' in code[1]
    assert [lab for lab in LABS if any(f'check_lab("{lab}")' in c for c in code)] == LABS
    assert "zipfile" in code[-1] and "kernel.cu" in code[-1]
    try:
        import nbformat
    except ImportError:
        return
    nbformat.validate(nbformat.reads(NOTEBOOK.read_text(), as_version=4))


def test_the_notebook_runs_top_to_bottom(tmp_path):
    try:
        import nbclient
        import nbformat
    except ImportError as err:
        pytest.skip(f"nbclient is not installed ({err}): on Debian, apt-get install python3-nbclient "
                    "python3-ipykernel (tests/install-deps.sh does, as root)")
    if subprocess.run(["pkg-config", "--exists", "check"]).returncode != 0:
        pytest.skip("the Check library is not installed")
    done = subprocess.run(["bash", "grader/dist/pack.sh", str(tmp_path / "kit.tar.gz")], cwd=KIT_ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "kit.tar.gz") as tar:
        tar.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    kit = tmp_path / "stencil-lab-kit"
    assert (kit / "notebooks" / "colab.ipynb").is_file()
    for lab in LABS:
        shutil.copy(KIT_ROOT / "reference" / lab / "kernel.cu", kit / "starter" / lab / "kernel.cu")
    work = tmp_path / "content"                     # where Colab starts
    work.mkdir()
    nb = nbformat.read(str(kit / "notebooks" / "colab.ipynb"), as_version=4)
    os.environ["STENCIL_KIT"] = str(kit)
    try:
        nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}}).execute()
    finally:
        del os.environ["STENCIL_KIT"]
    streams = ["".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
               for c in nb.cells if c.cell_type == "code"]
    last = streams[-1].strip().splitlines()
    assert (work / "submission.zip").is_file()
    if HAVE_GPU:
        assert last[-1].startswith(f"{len(LABS)} of {len(LABS)} labs graded on "), streams[-1]
        for lab in LABS:
            assert re.search(rf"{lab}: pass, 100\.00 of 100 points", streams[-1]), streams[-1]
    else:
        assert last[-1].endswith("not measured"), streams[-1]
        for lab in LABS:
            assert f"{lab}: not measured" in streams[-1]
