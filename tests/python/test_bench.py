"""bench.py: the timed run's exit codes, its JSON read from the private channel alone."""

import json
import re

import pytest

from conftest import KIT_ROOT, write_script
from stencil_grader.base import process, protocol
from stencil_grader.grading import bench

GOOD = {"device": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sm_count": 132, "nx": 16384, "ny": 8192, "nz": 1,
        "steps": 1, "scaled_down": False, "note": "", "array_bytes": 536870912, "repetitions": 20,
        "ms_median": 0.4, "ms_min": 0.39, "ms_max": 0.45, "bytes_compulsory": 1073741824,
        "gbps": 2684.35, "copy_gbps": 3000.0, "ratio": 0.8948, "output_ok": True, "output_message": "",
        "seed": 12}


def fake_bench(build_dir, body):
    """A bench whose `channel` is the grader's channel (stdout when run without one)."""
    write_script(build_dir / "bench", "import json, os, sys, time\n"
                 "fd = os.environ.get('STENCIL_CHANNEL_FD')\n"
                 "channel = os.fdopen(int(fd), 'w') if fd else sys.stdout\n" + body)


def writes_json(data, status=0, extra=""):
    """A bench body: argv on stderr, then the JSON where --json says ("-": the channel), then extra."""
    return (f"out = sys.argv[sys.argv.index('--json') + 1]\n"
            f"print('argv: ' + ' '.join(sys.argv[1:]), file=sys.stderr)\n"
            f"f = channel if out == '-' else open(out, 'w')\n"
            f"json.dump({data!r}, f)\nf.flush()\n{extra}sys.exit({status})\n")


def test_measured_run(tmp_path):
    fake_bench(tmp_path, writes_json(GOOD))
    run = bench.run_bench(tmp_path, 30, seed=12)
    assert run.status == "ok" and run.data["ratio"] == pytest.approx(0.8948)
    assert run.stderr_tail.split()[-4:] == ["--json", "-", "--seed", "12"]
    assert json.loads((tmp_path / "bench.json").read_text()) == GOOD
    assert run.notes == [] and run.sandbox["directory"].startswith("on")


def test_wrong_output_is_still_measured(tmp_path):
    fake_bench(tmp_path, writes_json(dict(GOOD, output_ok=False, output_message="cell (1, 2): got nan")))
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "ok" and run.data["output_ok"] is False
    assert "--seed" not in run.stderr_tail


def test_a_second_object_on_the_channel_is_rejected(tmp_path):
    """Only the harness writes on the channel; two objects there mean it is broken."""
    fake_bench(tmp_path, writes_json(GOOD, extra="print(json.dumps(" + repr(GOOD) + "), file=channel)\n"))
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "error" and "more than one JSON object" in run.message and run.data is None


def test_a_kernels_printf_is_the_students_output_not_an_error(tmp_path):
    """A device printf on stdout is kept for the report; the figures on the channel stand."""
    fake_bench(tmp_path, "print('x=1 y=2 (device printf)', flush=True)\n"
               + writes_json(GOOD, extra="print('more printf after the figures')\n"))
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "ok" and run.data["ratio"] == pytest.approx(0.8948)
    assert "x=1 y=2 (device printf)" in run.output and "more printf after the figures" in run.output


def test_a_flood_of_printf_is_capped(tmp_path):
    fake_bench(tmp_path, "print('spam ' * 20000, flush=True)\n" + writes_json(GOOD))
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "ok" and len(run.output) < process.OUTPUT_MAX_BYTES + 200
    assert "more bytes not shown" in run.output


FORGED = dict(GOOD, ratio=0.99, gbps=2970.0)


@pytest.mark.parametrize("before, after", [
    (f"print(json.dumps({FORGED!r}), flush=True)\n", ""),            # on stdout, where figures once were read
    ("", f"json.dump({FORGED!r}, open('-', 'w'))\njson.dump({FORGED!r}, open('bench.json', 'w'))\n"),  # files, later
], ids=["stdout", "files_written_later"])
def test_figures_forged_off_the_channel_are_never_read(tmp_path, before, after):
    fake_bench(tmp_path, before + writes_json(GOOD, extra=after))
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "ok" and run.data["ratio"] == pytest.approx(0.8948)


@pytest.mark.parametrize("code, status, words", [
    (2, "no_gpu", "no CUDA-capable device is detected"),
    (3, "cuda_error", "CUDA error: an illegal memory access was encountered"),
    (4, "debug_build", "debug build (-G): not timed"),
    (7, "error", "exited with status 7"),
])
def test_exit_codes(tmp_path, code, status, words):
    messages = {2: "no CUDA-capable device is detected",
                3: "CUDA error: an illegal memory access was encountered (kernel.cu:40)"}
    fake_bench(tmp_path, f"print({messages.get(code, 'bench: something')!r}, file=sys.stderr)\nsys.exit({code})\n")
    run = bench.run_bench(tmp_path, 30)
    assert run.status == status and words in run.message and run.data is None


def test_timeout(tmp_path):
    fake_bench(tmp_path, "time.sleep(30)\n")
    run = bench.run_bench(tmp_path, 1)
    assert run.status == "timeout" and "timed out after 1 s" in run.message


def test_stale_json_is_never_reused(tmp_path):
    (tmp_path / "bench.json").write_text(json.dumps(GOOD))
    fake_bench(tmp_path, "sys.exit(0)\n")
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "error" and "wrote no JSON on its channel" in run.message
    assert not (tmp_path / "bench.json").exists()


@pytest.mark.parametrize("change, words", [
    ({"ratio": None}, "key 'ratio' must be float"),
    ({"ratio": float("nan")}, "key 'ratio' must be a finite number"),
    ({"launchers": [{"name": "residual_norm2"}]}, "bench JSON.launchers[0] lacks key 'repetitions'"),
    ({"audit": {"status": "ok", "message": "", "calls": 2, "lost": 0, "launches": [{"launcher": "s"}]}},
     "bench JSON.audit.launches[0] lacks key 'kind'"),
    ({"seconds": {"context": "0.3"}}, "bench JSON.seconds: key 'context' must be float"),
    ({"gbps": -1.0}, "key 'gbps' must be a finite number >= 0"),
    ({"copy_gbps": 0}, "copy_gbps must be > 0"),
    ({"output_ok": 1}, "key 'output_ok' must be bool"),
    ({"device": 5}, "key 'device' must be str"),
])
def test_bad_json_values(change, words):
    with pytest.raises(bench.BenchFormatError, match=re.escape(words)):
        bench.validate(dict(GOOD, **change))


def test_the_schema_is_what_protocol_h_declares():
    """One declaration for both sides: every key of every object is a KEY_ macro of protocol.h."""
    header = protocol.c_header()
    schemas = [value for name, value in vars(protocol).items() if name.endswith("_KEYS")]
    in_header = [schema for _, schema in protocol._C_OBJECTS]
    assert len(schemas) == len(in_header) and all(any(s is h for h in in_header) for s in schemas)
    for prefix, schema in protocol._C_OBJECTS:
        for key in schema:
            assert f'#define KEY_{prefix}{key} "{key}"' in header


def test_the_c_side_names_keys_only_through_protocol_h():
    """No source of check or bench (grader/harness/*.c, the kinds) writes a key as a literal: every json_* call
    names a KEY_ macro (or NULL inside an array), and no JSON object is printed by hand.  (smem_roof.cu, built
    alone by hand, is no part of them.)"""
    harness = KIT_ROOT / "grader" / "harness"
    sources = {p.name: p.read_text() for p in sorted(harness.glob("*.c")) + sorted(harness.glob("kinds/*.c*"))}
    calls = re.findall(r"json_(?:string|number|integer|bool|open_object|open_array)\(&?\w+,\s*([^,)]+)",
                       "".join(sources.values()))
    assert len(calls) > 20 and all(c.startswith("KEY_") or c == "NULL" for c in calls), calls
    assert "KEY_solve_residual" in sources["jacobi_residual.c"]          # the solver's JSON, too
    printed = [name for name, text in sources.items() if re.search(r'printf\([^;]*"\{\\"', text)]
    assert printed == [], printed


def test_launches_py_reads_only_declared_keys():
    source = (KIT_ROOT / "grader" / "stencil_grader" / "grading" / "launches.py").read_text()
    read = set(re.findall(r"""(?:\[|\.get\()["'](\w+)["']""", source))
    declared = (set(protocol.BENCH_KEYS) | set(protocol.AUDIT_KEYS) | set(protocol.AUDIT_LAUNCH_KEYS)
                | set(protocol.LAUNCHER_KEYS))
    assert read and read <= declared, read - declared


def test_missing_key_and_bad_file(tmp_path):
    data = dict(GOOD)
    del data["copy_gbps"]
    with pytest.raises(bench.BenchFormatError, match="lacks key 'copy_gbps'"):
        bench.validate(data)
    fake_bench(tmp_path, "print('{\"ratio\": ', file=channel)\n")
    run = bench.run_bench(tmp_path, 30)
    assert run.status == "error" and "does not parse" in run.message
