"""The GPUs a class grading may use, each proved usable by a tiny CUDA program first.

nvidia-smi can list a GPU that no program can use (fallen off the bus, a
broken driver state, an ECC error that needs a reset).  Sent there, every lab
would come back "not measured" or "crash".  So before grading, each GPU of the
class's list is probed: a short program (PROBE_PROGRAM, run in its own process
with CUDA_VISIBLE_DEVICES set to the GPU's UUID, and a time limit) initialises
the CUDA driver, makes a context on the GPU, JIT-compiles a one-instruction PTX
kernel, runs it and reads back what it wrote.  A GPU that fails is taken out of
the pool with a message naming it and what failed; the others grade.  When a
grading comes back saying its GPU was unusable, the GPU is probed again and
taken out if it fails now (GpuSet.suspect).

The probe uses the CUDA driver API through ctypes (the grader never links
against CUDA): libcuda.so.1 comes with the NVIDIA driver, so it needs no build
and no toolkit.  It also says which GPU CUDA shows a process (UUID, name,
compute capability): the batch back ends use that to find the GPU the engine gave a
task (identify()).

The pool itself, the lock that keeps two gradings off one GPU, is base/locks.py's
GpuPool: each grading process takes a free GPU among the indices this module
hands it (`grade.py lab --gpu-locks DIR --gpus 0,2`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from ..base import gpus as gpulist
from ..base.gpus import Gpu

#: Seconds one probe may take (driver initialisation on a large machine takes a few).
PROBE_TIMEOUT_S = 90.0

#: The probe: a Python program using the CUDA driver API through ctypes.  It prints one JSON
#: object: {"status": "ok", "uuid", "name", "cc", "driver"}, or {"status": "no_gpu" | "failed",
#: "message"}.  "no_gpu": no driver, or the driver sees no GPU; "failed": a GPU is there and a
#: step failed (the message names the call and CUDA's error).
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
        call("cuDevicePrimaryCtxRelease_v2", dev)
        if h_out.value != 1234567:
            return {"status": "failed", "message": f"the probe kernel wrote {h_out.value}, not 1234567"}
    except Failed as err:
        return {"status": "failed", "message": err.args[1]}
    return {"status": "ok", "uuid": f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}",
            "name": raw.value.decode(errors="replace"), "cc": f"{cc[0].value}.{cc[1].value}",
            "driver": driver.value}


print(json.dumps(main()))
'''

@dataclass
class ProbeResult:
    """What the probe saw.  status: "ok", "no_gpu" (no driver, or no GPU visible) or "failed"
    (a GPU is there and could not be used; message says which call failed).  With "ok":
    the GPU's uuid, name and compute capability cc ("9.0")."""

    status: str
    message: str = ""
    uuid: str = ""
    name: str = ""
    cc: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def probe(uuid: str | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Run PROBE_PROGRAM in its own process and return what it found.

    uuid: the GPU to probe (CUDA_VISIBLE_DEVICES=uuid for the probe); None: the first GPU
    this process's environment shows (e.g. the one the batch engine gave the task).
    Never raises: a probe that hangs past timeout_s, crashes or prints no JSON is "failed".
    """
    env = dict(os.environ)
    if uuid is not None:
        env["CUDA_VISIBLE_DEVICES"] = uuid
    try:
        done = subprocess.run([sys.executable, "-c", PROBE_PROGRAM], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return ProbeResult("failed", f"the probe did not finish in {timeout_s:g} s (a hung GPU?)")
    except OSError as err:
        return ProbeResult("failed", f"the probe could not start: {err}")
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return ProbeResult("failed", f"the probe crashed: {why}")
    return ProbeResult(data.get("status", "failed"), data.get("message", ""), data.get("uuid", ""),
                       data.get("name", ""), data.get("cc", ""))


Probe = Callable[[Gpu], ProbeResult]


def _probe_gpu(gpu: Gpu) -> ProbeResult:
    return probe(gpu.uuid)


def describe(gpu: Gpu) -> str:
    """'GPU 1 (NVIDIA H100 80GB HBM3, GPU-5c3e...)'."""
    return f"GPU {gpu.index} ({gpu.name}, {gpu.uuid})"


def choose(spec: str | None) -> tuple[list[Gpu], str | None]:
    """The GPUs `--gpus spec` names ("all", the default, or indices "0,2") among those
    nvidia-smi lists, and None; or ([], why there is none) on a machine without GPUs.
    Raises ValueError for an index that is not there (the message lists the indices)."""
    found, why = gpulist.list_gpus()
    if why:
        if spec not in (None, "all"):
            raise ValueError(f"--gpus {spec}: {why}")
        return [], why
    return gpulist.select(found, spec or "all"), None


class GpuSet:
    """The usable GPUs of one class grading: the chosen ones, less those that failed a probe.

    Thread-safe: the gradings of a local class run in threads, and any of them may report
    its GPU as suspect.  `say` receives each message (a GPU taken out); `notes` keeps them
    for the class summary.
    """

    def __init__(self, chosen: list[Gpu], probe_gpu: Probe = _probe_gpu, say: Callable[[str], None] = print):
        self.chosen = list(chosen)
        self.usable = list(chosen)
        self.removed: dict[int, str] = {}
        self.notes: list[str] = []
        self._probe = probe_gpu
        self._say = say
        self._lock = threading.Lock()

    def _remove(self, gpu: Gpu, why: str) -> None:
        self.usable = [g for g in self.usable if g.index != gpu.index]
        self.removed[gpu.index] = why
        note = f"{describe(gpu)} failed its probe ({why}): taken out of the pool"
        self.notes.append(note)
        self._say(note)

    def check(self) -> None:
        """Probe every chosen GPU (in parallel) and take out those that fail."""
        if not self.chosen:
            return
        with ThreadPoolExecutor(max_workers=len(self.chosen)) as pool:
            results = list(pool.map(self._probe, self.chosen))
        with self._lock:
            for gpu, result in zip(self.chosen, results):
                if not result.ok:
                    self._remove(gpu, result.message or result.status)

    def indices(self) -> str | None:
        """`--gpus` for a grading: "0,2" (the usable GPUs), or None when no GPU was chosen at
        all (a machine without GPUs: the gradings run and find none)."""
        with self._lock:
            return ",".join(str(g.index) for g in self.usable) if self.chosen else None

    @property
    def exhausted(self) -> bool:
        """True when GPUs were chosen and every one of them has been taken out."""
        with self._lock:
            return bool(self.chosen) and not self.usable

    def suspect(self, index: int) -> bool:
        """A grading on GPU `index` saw no usable GPU: probe it again; True when the GPU is
        (now, or already) out of the pool, so that the grading should be run again elsewhere."""
        with self._lock:
            if index in self.removed:
                return True
            gpu = next((g for g in self.usable if g.index == index), None)
            if gpu is None:
                return False
            result = self._probe(gpu)
            if result.ok:
                return False
            self._remove(gpu, result.message or result.status)
            return True

    def models(self) -> list[str]:
        """The distinct GPU names among the usable GPUs."""
        return sorted({g.name for g in self.usable})


def identify(probe_result: ProbeResult, listed: list[Gpu]) -> Gpu | None:
    """The GPU of nvidia-smi's list that the probe found (matched by UUID), or None."""
    if not probe_result.ok:
        return None
    return next((g for g in listed if g.uuid == probe_result.uuid), None)
