"""EBISU beside lab 8's reference (instructor/ebisu.py): where its sources are looked for, how it is built (no
shell, PTX for compute_80), what its output gives, and the record's ratios.  No GPU: the timed run is the
instructor's (make ebisu EBISU=PATH on the GPU)."""

from __future__ import annotations

import pytest

from stencil_grader.base.cliargs import UsageError
from stencil_grader.instructor import ebisu

#: What EBISU's 2d5pt binary printed on an H200 (2026-11-28) for `8192 16384 --fp32 --iter=16 --warmup`.
PRINTED = ("800\t1\t16384\t8192\t16\t9\t256\t238\t<69,1,1>\t0.523/1\t128.004/227.000\t128/89\t4.277152\t"
           "501.898752\t\n")


def fake_repository(root, skip: str = ""):
    """A folder with the file names ebisu.SOURCES looks for (empty files), under root/2dstencil."""
    for name in ebisu.SOURCES:
        if name != skip:
            path = root / "2dstencil" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    return root


def test_the_result_line_is_read_by_its_fields():
    row = ebisu.parse_result("some log line\n" + PRINTED)
    assert (row["width_x"], row["width_y"], row["iteration"], row["depth"]) == (16384, 8192, 16, 9)
    assert row["runtime_ms"] == pytest.approx(4.277152) and row["tcells_per_s"] == pytest.approx(0.501898752)
    # its rate is cells x sweeps / time, the count lab 8's figures use (within 0.1%, as EBISU computes it)
    assert 16384 * 8192 * 16 / (row["runtime_ms"] * 1e-3) / 1e12 == pytest.approx(row["tcells_per_s"], rel=1e-3)


@pytest.mark.parametrize("text", ["", "unsupport setting, no free space for cache with shared memory\n",
                                  PRINTED.replace("4.277152", "nan-ish")])
def test_output_without_a_result_line_is_refused_with_what_it_printed(text):
    with pytest.raises(UsageError, match="no result line") as err:
        ebisu.parse_result(text)
    assert (text.strip().splitlines() or ["nothing"])[-1][:20] in str(err.value)


def test_the_sources_are_found_from_the_repository_or_its_2dstencil_folder(tmp_path):
    root = fake_repository(tmp_path / "EBISU ICS23 copy")
    assert ebisu.stencil_dir(root) == root / "2dstencil"
    assert ebisu.stencil_dir(root / "2dstencil") == root / "2dstencil"


def test_a_folder_that_is_not_ebisu_names_what_it_lacks(tmp_path):
    root = fake_repository(tmp_path / "repo", skip="2d5pt/config.cuh")
    with pytest.raises(UsageError, match=r"lacks 2d5pt/config\.cuh") as err:
        ebisu.stencil_dir(root)
    assert "neozhang307/EBISU-ICS23" in str(err.value)


def test_the_build_is_argument_lists_for_compute_80_ptx_with_paths_kept_whole(tmp_path):
    folder = ebisu.stencil_dir(fake_repository(tmp_path / "a path with spaces"))
    commands = ebisu.build_commands(folder, tmp_path / "out dir", "/opt/cuda/bin/nvcc")
    assert all(isinstance(argv, list) and all(isinstance(a, str) for a in argv) for argv in commands)
    nvcc = [argv for argv in commands if argv[0] == "/opt/cuda/bin/nvcc"]
    assert len(nvcc) == 3 and all("arch=compute_80,code=compute_80" in argv and "-rdc=true" in argv for argv in nvcc)
    assert str(folder / "jacobi-2d.cu") in commands[1]              # one argument, spaces and all
    assert commands[-1][-1] == str(tmp_path / "out dir" / "ebisu-2d5pt")
    assert "-DTRATEMPORAL" in commands[0] and "-DEBISU" in commands[1] and "-DEBISU" in commands[4]


def test_the_record_puts_both_on_the_same_grid_and_says_the_ratios(tmp_path):
    bench = {"nx": 16384, "ny": 8192, "steps": 16, "ms_median": 1.2693, "ratio": 3.24, "copy_gbps": 4171.6,
             "device": "NVIDIA H200", "cc": "9.0", "sm_count": 132}
    asked = []

    def run(binary, args):
        asked.append(args)
        if "--experiment" in args:
            return ebisu.parse_result(PRINTED.replace("16384\t8192\t16", "8568\t8568\t9")
                                      .replace("4.277152\t501.898752", "0.732320\t901.774080"))
        return ebisu.parse_result(PRINTED)

    record = ebisu.compare(tmp_path, measure=lambda lab, impl: (bench, {"K": 8}), run=run,
                           check=lambda binary: 3.1e-7, built=tmp_path / "ebisu-2d5pt")
    assert asked[0][:2] == ["8192", "16384"] and "--iter=16" in asked[0]      # width_y, then width_x: ny, nx
    ours, same, best = record["rows"]
    assert (same["nx"], same["ny"], same["steps"]) == (ours["nx"], ours["ny"], ours["steps"])
    assert ours["tcells_per_s"] == pytest.approx(16384 * 8192 * 16 / 1.2693e-3 / 1e12)
    assert record["ratio_bench_grid"] == pytest.approx(ours["tcells_per_s"] / 0.501898752)
    assert record["ratio_best"] == pytest.approx(ours["tcells_per_s"] / 0.90177408)
    assert record["record"] == "ebisu" and record["device"]["name"] == "NVIDIA H200"
    assert record["ebisu_check_rms"] == 3.1e-7 and record["ebisu_check"] == " ".join(ebisu.CHECK_ARGS)
    assert "NVIDIA H200" in ebisu.render(record)


def test_without_a_gpu_the_command_says_so_before_building(tmp_path, monkeypatch, capsys):
    from stencil_grader import cli
    from stencil_grader.base import gpuprobe
    from stencil_grader.instructor import commands

    monkeypatch.setattr(commands.gpuprobe, "probe", lambda **_: gpuprobe.ProbeResult("no_gpu", "no CUDA-capable GPU"))
    monkeypatch.setattr(ebisu, "build", lambda *a, **k: pytest.fail("built without a GPU"))
    assert cli.main(["ebisu", "--src", str(fake_repository(tmp_path))]) == 2
    assert "ebisu needs a GPU: no CUDA-capable GPU" in capsys.readouterr().err


def fake_ebisu(tmp_path, printed: str, status: int = 0):
    """A program standing in for EBISU's binary: prints `printed`, exits with `status`."""
    program = tmp_path / "fake ebisu"
    program.write_text(f"#!/bin/sh\nprintf '%s' '{printed}'\nexit {status}\n")
    program.chmod(0o755)
    return program


def test_ebisus_own_check_passes_below_its_tolerance(tmp_path):
    assert ebisu.check_ebisu(fake_ebisu(tmp_path, "[Test] RMS Error : 2.500000e-07\n")) == 2.5e-7


@pytest.mark.parametrize("printed, status, words", [
    ("[Test] RMS Error : 3.000000e-02\n", 255, "RMS difference 0.03"),
    ("[Test] RMS Error : nan\n", 0, "RMS difference nan"),
    ("unsupport setting, no free space for cache with shared memory\n", 0, "no RMS difference printed"),
])
def test_a_failed_ebisu_check_stops_before_anything_is_timed(tmp_path, printed, status, words):
    with pytest.raises(UsageError, match="nothing is timed") as err:
        ebisu.check_ebisu(fake_ebisu(tmp_path, printed, status))
    assert words in str(err.value)


def test_without_nvcc_the_build_says_where_the_kit_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(ebisu.toolkit, "find_nvcc", lambda: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no toolkit"))
    monkeypatch.delenv("NVCC", raising=False)
    with pytest.raises(UsageError, match="ebisu needs nvcc") as err:
        ebisu.build(fake_repository(tmp_path), tmp_path / "out")
    assert ebisu.toolkit.why_no_nvcc() in str(err.value) and not (tmp_path / "out").exists()
