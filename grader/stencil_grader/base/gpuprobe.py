"""Is there a usable GPU, and what is it: a tiny program on the CUDA driver API.

The probe uses libcuda.so.1 through ctypes (the grader never links against CUDA):
libcuda comes with the NVIDIA driver, so the probe needs no build and no toolkit.
It runs in a process of its own, with a time limit, so that a hung or crashing
driver costs the probe only.  Its full form makes a context on the GPU,
JIT-compiles a one-instruction PTX kernel, runs it and reads back what it wrote
(the class pool proves each GPU so, classes/gpupool.py); its quick form stops
before the context and reports what the driver and the device say (the checks
before a student's build, base/preflight.py); its hold form is the full probe
that then keeps the context open until its stdin closes (ContextHold).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

#: Seconds one probe may take (driver initialisation on a large machine takes a few).
PROBE_TIMEOUT_S = 90.0

#: The probe: a Python program using the CUDA driver API through ctypes.  It prints one JSON object, ProbeResult's
#: fields.  Its argument: "quick" stops before making a context (no kernel is run); "full" runs the kernel; "hold"
#: is "full" plus "held": whether it keeps the primary context (not on a GPU whose compute mode is not the
#: default, where a second process's context would be refused), then waits for its stdin to end.
PROBE_PROGRAM = r'''
import ctypes, json, sys

PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry stencil_probe(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 1234567;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""
# What the occupancy of a launch depends on (cuda.h's CUdevice_attribute numbers).
LIMITS = {"sm_count": 16, "threads_per_sm": 39, "smem_per_sm": 81, "registers_per_sm": 82,
          "blocks_per_sm": 106, "smem_reserved_per_block": 111}
NO_GPU = {100: "CUDA_ERROR_NO_DEVICE", 34: "CUDA_ERROR_STUB_LIBRARY", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER"}


def main():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return {"status": "no_gpu", "message": f"no NVIDIA driver (libcuda.so.1: {err})"}

    def name_of(rc):
        text = ctypes.c_char_p()
        if cuda.cuGetErrorName(rc, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
        return f"CUDA error {rc}"

    class Failed(Exception):
        pass

    def call(fn, *args):
        rc = getattr(cuda, fn)(*args)
        if rc != 0:
            raise Failed(rc, f"{fn}: {name_of(rc)}")

    try:
        rc = cuda.cuInit(0)
        if rc in NO_GPU:
            return {"status": "no_gpu", "message": f"cuInit: {NO_GPU[rc]}"}
        if rc != 0:
            raise Failed(rc, f"cuInit: {name_of(rc)}")
        count = ctypes.c_int()
        call("cuDeviceGetCount", ctypes.byref(count))
        if count.value == 0:
            return {"status": "no_gpu", "message": "the driver sees no GPU"}
        dev = ctypes.c_int()
        call("cuDeviceGet", ctypes.byref(dev), 0)
        raw = ctypes.create_string_buffer(256)
        call("cuDeviceGetName", raw, 256, dev)
        uuid = (ctypes.c_ubyte * 16)()
        call("cuDeviceGetUuid_v2" if hasattr(cuda, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid", uuid, dev)
        h = bytes(uuid).hex()
        cc = [ctypes.c_int(), ctypes.c_int()]
        call("cuDeviceGetAttribute", ctypes.byref(cc[0]), 75, dev)      # COMPUTE_CAPABILITY_MAJOR
        call("cuDeviceGetAttribute", ctypes.byref(cc[1]), 76, dev)      # COMPUTE_CAPABILITY_MINOR
        driver = ctypes.c_int()
        call("cuDriverGetVersion", ctypes.byref(driver))
        total, l2 = ctypes.c_size_t(), ctypes.c_int()
        call("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
        call("cuDeviceGetAttribute", ctypes.byref(l2), 38, dev)         # L2_CACHE_SIZE
        limits = {}
        for key, attribute in LIMITS.items():
            value = ctypes.c_int()
            call("cuDeviceGetAttribute", ctypes.byref(value), attribute, dev)
            limits[key] = value.value
        found = {"status": "ok", "uuid": f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}",
                 "name": raw.value.decode(errors="replace"), "cc": f"{cc[0].value}.{cc[1].value}",
                 "driver": driver.value, "memory_total": total.value, "l2_bytes": l2.value, "limits": limits}
        if MODE == "quick":
            return found
        ctx = ctypes.c_void_p()
        call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        call("cuCtxSetCurrent", ctx)
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(PTX))
        call("cuModuleGetFunction", ctypes.byref(function), module, b"stencil_probe")
        d_out = ctypes.c_uint64()
        call("cuMemAlloc_v2", ctypes.byref(d_out), ctypes.c_size_t(4))
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(d_out), ctypes.c_void_p))
        call("cuLaunchKernel", function, 1, 1, 1, 1, 1, 1, 0, None, params, None)
        call("cuCtxSynchronize")
        h_out = ctypes.c_uint32()
        call("cuMemcpyDtoH_v2", ctypes.byref(h_out), d_out, ctypes.c_size_t(4))
        call("cuMemFree_v2", d_out)
        call("cuModuleUnload", module)
        if h_out.value != 1234567:
            return {"status": "failed", "message": f"the probe kernel wrote {h_out.value}, not 1234567"}
        if MODE == "hold":
            compute_mode = ctypes.c_int()
            call("cuDeviceGetAttribute", ctypes.byref(compute_mode), 20, dev)   # COMPUTE_MODE: 0 is the default
            found["held"] = compute_mode.value == 0
            if found["held"]:
                return found
        call("cuDevicePrimaryCtxRelease_v2", dev)
    except Failed as err:
        return {"status": "failed", "message": err.args[1]}
    return found


MODE = sys.argv[1] if sys.argv[1:] else "full"
found = main()
print(json.dumps(found), flush=True)
if found.get("held"):
    sys.stdin.read()
'''

@dataclass
class ProbeResult:
    """What the probe saw.  status: "ok", "no_gpu" (no driver, or no GPU visible) or "failed"
    (a GPU is there and could not be used; message says which call failed).  With "ok":
    the GPU's uuid, name and compute capability cc ("9.0"), driver (the CUDA release the
    driver supports, 13000 = 13.0), memory_total and l2_bytes (bytes), and limits: what an SM
    holds (sm_count, threads_per_sm, smem_per_sm and smem_reserved_per_block in bytes,
    registers_per_sm, blocks_per_sm)."""

    status: str
    message: str = ""
    uuid: str = ""
    name: str = ""
    cc: str = ""
    driver: int = 0
    memory_total: int = 0
    l2_bytes: int = 0
    limits: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def probe(uuid: str | None = None, timeout_s: float = PROBE_TIMEOUT_S, quick: bool = False) -> ProbeResult:
    """Run PROBE_PROGRAM in its own process and return what it found.

    uuid: the GPU to probe (CUDA_VISIBLE_DEVICES=uuid for the probe); None: the first GPU
    this process's environment shows (e.g. the one the batch engine gave the task).  quick: stop before
    the context and the kernel (what the driver and the device attributes say).
    Never raises: a probe that hangs past timeout_s, crashes or prints no JSON is "failed".
    """
    return ContextHold(uuid, timeout_s, "quick" if quick else "full").result


class ContextHold:
    """One run of the probe program; in mode "hold" (the default) the full probe of one GPU, whose process then
    keeps the GPU's primary CUDA context open while a class is graded on it: one CUDA start per GPU for both.

    Every grading starts CUDA programs (check, bench), and the driver serialises part of each start across the
    host; with a context held open on each GPU the starts are shorter (measured on 4 H200: grader/README.md,
    section "This host").  The held context is idle (no kernel, no memory but the context's own).

    uuid: the GPU (CUDA_VISIBLE_DEVICES=uuid); None: the first GPU this process's environment shows.  mode:
    PROBE_PROGRAM's argument.  Never raises: `result` is what the probe saw (a ProbeResult; "failed" for a probe
    that hangs past timeout_s, crashes or prints no JSON); `held` whether the context is open (never without a
    usable GPU, nor on a GPU in an exclusive compute mode, where it would lock the gradings out).  close() ends
    the holder, and so does the end of the grader's process (the holder's stdin closes).
    """

    def __init__(self, uuid: str | None = None, timeout_s: float = PROBE_TIMEOUT_S, mode: str = "hold"):
        self.held = False
        env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": uuid} if uuid is not None else {}))
        # Its stderr goes to a file, not a pipe: a holder that writes more than a pipe holds while nobody
        # reads it would block, and never see its stdin close.
        self._stderr = tempfile.TemporaryFile(mode="w+")
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", PROBE_PROGRAM, mode], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)
        except OSError as err:
            self._stderr.close()
            self._proc = None
            self.result = ProbeResult("failed", f"the probe could not start: {err}")
            return
        if not select.select([self._proc.stdout], [], [], timeout_s)[0]:
            self._proc.kill()
            self.close()
            self.result = ProbeResult("failed", f"the probe did not finish in {timeout_s:g} s (a hung GPU?)")
            return
        try:
            data = json.loads(self._proc.stdout.readline())
            self.held = data.get("held") is True
        except (json.JSONDecodeError, AttributeError):
            data = None
        if not self.held:                           # the probe has ended, or is ending: it holds nothing
            status = self._proc.wait()              # all it wrote is in the file once it has ended
            self._stderr.seek(0)
            why = (self._stderr.read().strip().splitlines() or [f"exit status {status}"])[-1]
            self.close()
            if not isinstance(data, dict):
                self.result = ProbeResult("failed", f"the probe crashed: {why}")
                return
        self.result = ProbeResult(data.get("status", "failed"), data.get("message", ""), data.get("uuid", ""),
                                  data.get("name", ""), data.get("cc", ""), int(data.get("driver") or 0),
                                  int(data.get("memory_total") or 0), int(data.get("l2_bytes") or 0),
                                  dict(data.get("limits") or {}))

    def close(self) -> None:
        """Ends the holder (at once; it is killed if it has not ended within 10 s)."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        proc.stdout.close()
        self._stderr.close()
