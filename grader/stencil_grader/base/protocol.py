"""What the harness's programs (check, bench) and the grader agree on, declared once: the private
channel's environment variables and the line that starts a timed run in check, the exit statuses, and
the bench's JSON (every key of every nested object with its type and meaning: the schema bench.c
writes through the KEY_* macros, grading/bench.py checks with check_object and grading/launches.py
reads; SOLVE_KEYS, `bench --solve`'s, student/solve.py checks; DEVICE_LINE_KEYS, check's `device:` line).
c_header() turns every one of them into KEY_* macros of protocol.h, which
lab.mk generates into each harness build (`grade.py protocol`); what each means: grader/README.md,
section "How the pieces talk".
"""

from __future__ import annotations

from dataclasses import dataclass

#: Environment variable holding the number of the channel's file descriptor (process.run(channel=True)).
CHANNEL_FD_ENV = "STENCIL_CHANNEL_FD"
#: Environment variable that asks a one-process check run (CK_FORK=no) to time the kernel once every
#: case has passed, in the same process (one CUDA start per grading): "1".
THEN_BENCH_ENV = "STENCIL_THEN_BENCH"
#: The line check writes on the channel, after Check's XML log, when it starts that timed run; the
#: bench's JSON object follows it (grading/checkstream.py reads both).
BENCH_STARTED = "bench:"
#: Environment variable holding the number of a file descriptor a one-process check run reads one byte
#: from after its CUDA start (its `device:` line written), before its first case: the grader writes
#: it once this grading holds its GPU (process.run(go=...)), so the start overlaps the grading before it.
#: End of file instead of the byte: the grader gave up; the run ends with EXIT_NO_GO.
GO_FD_ENV = "STENCIL_GO_FD"

#: Exit statuses, shared by check and bench: (name, value, meaning).
EXIT_STATUSES = (
    ("OK", 0, "check: every case passed; bench: measured (even when the output was wrong: the JSON says so)"),
    ("FAILED", 1, "check: a case did not pass; bench: the channel could not be written"),
    ("NO_GPU", 2, "no usable GPU (the reason on stderr)"),
    ("CUDA_ERROR", 3, "a CUDA error outside a case (the message on stderr)"),
    ("DEBUG_BUILD", 4, "a debug build (-G): never timed"),
    ("USAGE", 64, "wrong arguments"),
    ("NO_GO", 65, "check: the grader closed the go descriptor (GO_FD_ENV) without letting the cases start"),
    ("EARLY_EXIT", 70, "check: the student's code called exit() inside a case or its timed run (the exit guard)"),
)
EXIT = {name: value for name, value, _ in EXIT_STATUSES}
EXIT_OK = EXIT["OK"]
EXIT_FAILED = EXIT["FAILED"]
EXIT_NO_GPU = EXIT["NO_GPU"]
EXIT_CUDA_ERROR = EXIT["CUDA_ERROR"]
EXIT_DEBUG_BUILD = EXIT["DEBUG_BUILD"]
EXIT_USAGE = EXIT["USAGE"]
EXIT_NO_GO = EXIT["NO_GO"]

#: CUDA errors that say the machine failed, not the student's code: the operating system refused a
#: thread or a resource (a process limit), no device or driver, a GPU lost or broken (names from the
#: CUDA Runtime API's cudaError enum).  A student's kernel gets launch failures, illegal addresses,
#: invalid configurations: never these.  The harness writes the name in each CUDA error message.
MACHINERY_CUDA_ERRORS = ("cudaErrorOperatingSystem", "cudaErrorNoDevice", "cudaErrorInsufficientDriver",
                         "cudaErrorDevicesUnavailable", "cudaErrorInitializationError",
                         "cudaErrorSystemNotReady", "cudaErrorSystemDriverMismatch", "cudaErrorStartupFailure",
                         "cudaErrorECCUncorrectable", "cudaErrorNvlinkUncorrectable",
                         "cudaErrorCompatNotSupportedOnDevice")


def machinery_error(message: str) -> str | None:
    """The MACHINERY_CUDA_ERRORS name a harness message holds ('... (cudaErrorOperatingSystem)'), else None."""
    return next((name for name in MACHINERY_CUDA_ERRORS if name in (message or "")), None)


@dataclass(frozen=True)
class Key:
    """One key of a JSON object the bench writes: its type (str, int, float, bool, list, dict),
    what it means, whether every object holds it, and for an object or a list of objects the
    schema of those (a dict of Key)."""

    type: type
    meaning: str
    required: bool = True
    schema: dict | None = None


#: Per launcher of the kind (bench JSON "launchers").  Units as the top level's.
LAUNCHER_KEYS = {
    "name": Key(str, "the launcher, as kinds.json names it"),
    "repetitions": Key(int, "its timed calls"),
    "ms_median": Key(float, "median time of one call"),
    "precision": Key(float, "half-width of the median's 95% confidence interval over the median"),
    "bytes_compulsory": Key(float, "bytes one call must move"),
    "gbps": Key(float, "its effective bandwidth; 0 when output_ok is false"),
    "ratio": Key(float, "gbps / copy_gbps"),
    "output_ok": Key(bool, "every call's output matched the harness's GPU reference (and the repeats)"),
    "repeats": Key(int, "untimed calls on the first timed call's input, compared bit for bit with it "
                        "(0: the kind asks no determinism of this launcher)"),
    "repeats_identical": Key(bool, "every repeat gave the first timed call's bits"),
}
#: One operation the audited calls started (bench JSON "audit"."launches"), with a count.
AUDIT_LAUNCH_KEYS = {
    "launcher": Key(str, "the launcher whose call started it"),
    "kind": Key(str, "kernel, memcpy or memset"),
    "name": Key(str, "the kernel's mangled name; memcpy or memset"),
    "on_launcher_stream": Key(bool, "it ran on the stream the launcher was given"),
    "stream": Key(int, "CUPTI's stream id"),
    "count": Key(int, "how many times the audited calls started it"),
    "grid": Key(list, "gridDim x, y, z (kernels)", required=False),
    "block": Key(list, "blockDim x, y, z (kernels)", required=False),
    "static_smem": Key(int, "bytes of static shared memory per block (kernels)", required=False),
    "dynamic_smem": Key(int, "bytes of dynamic shared memory per block (kernels)", required=False),
    "registers": Key(int, "registers per thread (kernels)", required=False),
    "bytes": Key(int, "bytes copied or set (memcpy, memset)", required=False),
    "src_memory": Key(str, "where a copy read (memcpy; a memset: its memory), as CUPTI saw it: device, "
                           "device_static, array, pageable, pinned, managed, managed_static or unknown",
                      required=False),
    "dst_memory": Key(str, "where a copy or set wrote, named as src_memory", required=False),
    "ms": Key(float, "its time on the GPU, milliseconds"),
}
#: The launch audit (bench JSON "audit"): grader/harness/audit.c, grading/launches.py.
AUDIT_KEYS = {
    "status": Key(str, "ok, or unavailable (no CUPTI, or --no-audit)"),
    "message": Key(str, "why it is unavailable"),
    "calls": Key(int, "calls audited"),
    "lost": Key(int, "records lost (more than the bench keeps, records CUPTI dropped, or a window "
                     "without its marker): every rule the audit feeds then fails"),
    "launches": Key(list, "every distinct operation of the audited calls", schema=AUDIT_LAUNCH_KEYS),
}
#: The bench's own phases (bench JSON "seconds"), wall seconds.
SECONDS_KEYS = {
    "context": Key(float, "finding the GPU and making its context"),
    "copy_probe": Key(float, "measuring the copy bandwidth"),
    "calls": Key(float, "the launchers' calls: warm-up, timed, audited, repeated"),
    "total": Key(float, "the whole run"),
}
#: The bench's JSON object (`bench --json`).  float keys are finite numbers >= 0; times in
#: milliseconds, bandwidths in GB/s with 1 GB = 1e9 bytes.
BENCH_KEYS = {
    "device": Key(str, "the GPU's name, as the CUDA runtime reports it"),
    "cc": Key(str, "its compute capability, e.g. 9.0"),
    "sm_count": Key(int, "its multiprocessors"),
    "nx": Key(int, "the timed grid"),
    "ny": Key(int, "the timed grid"),
    "nz": Key(int, "the timed grid (1 in 2D)"),
    "steps": Key(int, "sweeps per call (multi-step kinds), else 1"),
    "scaled_down": Key(bool, "the lab.json grid did not fit in GPU memory"),
    "note": Key(str, "why it was scaled down, or empty"),
    "array_bytes": Key(int, "bytes of one grid"),
    "repetitions": Key(int, "timed calls of each launcher (the fewest)"),
    "precision": Key(float, "half-width of the median's 95% confidence interval over the median (the largest)",
                     required=False),
    "ms_median": Key(float, "median time of one call (of each launcher, added up)"),
    "ms_min": Key(float, "fastest call"),
    "ms_max": Key(float, "slowest call"),
    "bytes_compulsory": Key(float, "bytes one call must move"),
    "gbps": Key(float, "effective bandwidth: bytes_compulsory / ms_median; 0 when output_ok is false"),
    "copy_gbps": Key(float, "copy bandwidth: the larger of copy_memcpy_gbps and copy_kernel_gbps"),
    "copy_memcpy_gbps": Key(float, "cudaMemcpyAsync device to device, bytes read plus written", required=False),
    "copy_kernel_gbps": Key(float, "a float4 copy kernel, bytes read plus written", required=False),
    "ratio": Key(float, "gbps / copy_gbps; 0 when output_ok is false"),
    "output_ok": Key(bool, "every call's output matched the harness's GPU reference, every repeat its "
                           "first timed call"),
    "output_message": Key(str, "what the first wrong call got wrong"),
    "calls_checked_on_gpu": Key(int, "calls checked, untimed ones included", required=False),
    "launchers": Key(list, "one object per launcher", required=False, schema=LAUNCHER_KEYS),
    "audit": Key(dict, "the launch audit: every kernel and memory operation the launcher started "
                       "(without it, every rule that needs the audit is not verified)", required=False,
                 schema=AUDIT_KEYS),
    "seconds": Key(dict, "wall seconds of the bench's own phases", required=False, schema=SECONDS_KEYS),
    "seed": Key(int, "the input seed"),
}
#: `bench --probe`: the GPU.
PROBE_KEYS = {
    "device": Key(str, "the GPU's name"),
    "cc": Key(str, "its compute capability"),
    "sm_count": Key(int, "its multiprocessors"),
    "l2_bytes": Key(int, "its L2 cache"),
    "global_mem_bytes": Key(int, "its memory"),
    "mem_free_bytes": Key(int, "its memory free when probed"),
}
#: check's `device:` line on the channel, before its first case (grading/checkstream.py reads it): the probe's
#: keys, the GPU's name under "name".
DEVICE_LINE_KEYS = {"name": PROBE_KEYS["device"], **{k: v for k, v in PROBE_KEYS.items() if k != "device"}}
#: `bench --describe`: what the kind module linked into the build states itself (its function
#: table), which tests/python/test_kinds.py compares with grader/kinds.json.
DESCRIBE_KEYS = {
    "lab": Key(str, "the lab the build is for"),
    "api": Key(str, "the kind, as lab.json names it"),
    "solver": Key(bool, "the module has a solver (`bench --solve`)"),
    "case_modes": Key(bool, "the module runs cases of its own modes (determinism, convergence)"),
    "deterministic": Key(bool, "the module asks its launchers for the same bits on every run (digest)"),
    "bench_arrays": Key(int, "grids of the bench's size the module keeps on the GPU"),
}

#: `bench --solve N`: a solver's model problem (lab 7; the kind's solve_main writes it).
SOLVE_KEYS = {
    "n": Key(int, "grid points per side (an N x N grid)"),
    "h": Key(float, "the grid spacing, 1 / (N - 1)"),
    "sweeps": Key(int, "Jacobi sweeps made"),
    "converged": Key(bool, "the residual fell by the reduction asked for"),
    "reduction": Key(float, "the reduction asked for"),
    "rate_expected": Key(float, "the spectral radius of the Jacobi iteration, cos(pi h)"),
    "rate_measured": Key(float, "the residual's decay per sweep over the last 20 sweeps (null when not finite; "
                                "student/solve.py measures its own)", required=False),
    "max_error": Key(float, "the largest error against the exact solution (null when not finite)"),
    "discretisation_error": Key(float, "the error of the exact discrete solution (the floor of max_error)"),
    "residual": Key(list, "the residual's 2-norm before each sweep and after the last, sweeps + 1 values"),
}

#: How a Check case's message starts when the CUDA runtime refused a launch of the student's
#: launcher (a grid or block beyond the GPU's limits, too much shared memory): the case failed,
#: the program did not crash (grading/checkrun.py counts such cases apart).
LAUNCH_REFUSED = "launch refused:"

#: The objects of the C header, as KEY_<prefix><key>: the top level as KEY_<key>.
_C_OBJECTS = (("", BENCH_KEYS), ("launcher_", LAUNCHER_KEYS), ("audit_", AUDIT_KEYS),
              ("launch_", AUDIT_LAUNCH_KEYS), ("seconds_", SECONDS_KEYS), ("probe_", PROBE_KEYS),
              ("describe_", DESCRIBE_KEYS), ("solve_", SOLVE_KEYS),
              ("device_", DEVICE_LINE_KEYS))


class SchemaError(ValueError):
    """A JSON object that does not follow its schema; the message names the key and what it must be."""


def _type_ok(kind: type, value) -> bool:
    if kind is float:
        return not isinstance(value, bool) and isinstance(value, (int, float))
    if kind is int:
        return not isinstance(value, bool) and isinstance(value, int)
    return isinstance(value, kind)


def check_object(data, schema: dict, where: str = "bench JSON") -> dict:
    """data, after checking that it is an object holding every required key of schema with its
    type, nested objects and lists of objects included (keys the schema does not know are left
    alone); raises SchemaError naming the key."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where} is not an object")
    for name, key in schema.items():
        if name not in data:
            if key.required:
                raise SchemaError(f"{where} lacks key {name!r}")
            continue
        value, path = data[name], f"{where}: key {name!r}"
        if not _type_ok(key.type, value):
            raise SchemaError(f"{path} must be {key.type.__name__}, got {value!r}")
        if key.schema is not None:
            for i, item in enumerate(value if key.type is list else [value]):
                check_object(item, key.schema, f"{where}.{name}" + (f"[{i}]" if key.type is list else ""))
    return data


def c_header() -> str:
    """The text of protocol.h: EXIT_<NAME> statuses, KEY_[<object>_]<key> strings, CHANNEL_FD_ENV,
    THEN_BENCH_ENV, BENCH_STARTED and GO_FD_ENV."""
    lines = ["/* protocol.h: generated by grader/grade.py protocol from",
             " * grader/stencil_grader/base/protocol.py.  Do not edit. */",
             "#ifndef STENCIL_PROTOCOL_H", "#define STENCIL_PROTOCOL_H", "",
             "/* the environment variable naming the private channel's file descriptor */",
             f'#define CHANNEL_FD_ENV "{CHANNEL_FD_ENV}"',
             "/* check: time the kernel in this process once every case passed; the line before its JSON */",
             f'#define THEN_BENCH_ENV "{THEN_BENCH_ENV}"', f'#define BENCH_STARTED "{BENCH_STARTED}"',
             "/* check: the descriptor to read the grader's go from, after the CUDA start */",
             f'#define GO_FD_ENV "{GO_FD_ENV}"', "",
             "/* exit statuses of check and bench */"]
    lines += [f"#define EXIT_{name} {value} /* {meaning} */" for name, value, meaning in EXIT_STATUSES]
    lines += ["", "/* how a case's message starts when the runtime refused a launch of the student's launcher */",
              f'#define LAUNCH_REFUSED "{LAUNCH_REFUSED}"']
    for prefix, schema in _C_OBJECTS:
        lines += ["", f"/* the keys of the harness's JSON: {prefix.rstrip('_') or 'the top level'} */"]
        lines += [f'#define KEY_{prefix}{key} "{key}"' for key in schema]
    lines += ["", "#endif /* STENCIL_PROTOCOL_H */"]
    return "\n".join(lines) + "\n"
