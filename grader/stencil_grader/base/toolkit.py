"""The CUDA toolkit the kit builds with, and the GPU architectures each toolkit supports.

One finder for make and Python: lab.mk runs this file as a script (`toolkit.py make`, before
anything is built: standard library only, no import of the kit), the grader imports it.  The
architectures and drivers come from grader/toolkits.mk (grader/README.md); compute capabilities
are written without the dot (75 = 7.5).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: grader/toolkits.mk
TOOLKITS_FILE = Path(__file__).resolve().parents[2] / "toolkits.mk"
DEFAULT_HOME = Path("/usr/local/cuda")
VERSION_TIMEOUT_S = 30.0


def _executable(path: Path | str | None) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def find_nvcc(environ=None) -> str | None:
    """nvcc's path, or None: NVCC when set; else CUDA_HOME/bin/nvcc when CUDA_HOME is set (and nothing
    else); else the nvcc on PATH; else /usr/local/cuda/bin/nvcc.  environ: default os.environ."""
    env = os.environ if environ is None else environ
    if env.get("NVCC"):
        named = env["NVCC"] if os.sep in env["NVCC"] else shutil.which(env["NVCC"], path=env.get("PATH"))
        return named if _executable(named) else None
    if env.get("CUDA_HOME"):
        candidate = Path(env["CUDA_HOME"]) / "bin" / "nvcc"
        return str(candidate) if _executable(candidate) else None
    on_path = shutil.which("nvcc", path=env.get("PATH"))
    if on_path:
        return on_path
    default = DEFAULT_HOME / "bin" / "nvcc"
    return str(default) if _executable(default) else None


def cuda_home(environ=None, nvcc: str | None = None) -> Path | None:
    """The toolkit's folder: CUDA_HOME when set, else the folder above nvcc's bin/ (symbolic
    links followed, as a distribution's /usr/bin/nvcc -> ../lib/cuda/bin/nvcc), or None."""
    env = os.environ if environ is None else environ
    if env.get("CUDA_HOME"):
        return Path(env["CUDA_HOME"])
    nvcc = nvcc or find_nvcc(env)
    return Path(nvcc).resolve().parent.parent if nvcc else None


def why_no_nvcc(environ=None) -> str:
    """One line: where the finder looked and what to do (for when find_nvcc returns None)."""
    env = os.environ if environ is None else environ
    if env.get("NVCC"):
        return f"NVCC={env['NVCC']} is not an executable program"
    if env.get("CUDA_HOME"):
        return (f"CUDA_HOME={env['CUDA_HOME']} has no bin/nvcc: set CUDA_HOME to a CUDA toolkit's folder "
                "(the one holding bin/nvcc), or unset it to use the nvcc on PATH")
    return ("no nvcc on PATH nor in /usr/local/cuda/bin: install the CUDA toolkit, or set CUDA_HOME to its "
            "folder")


def release(nvcc: str | None = None, home: Path | None = None) -> str | None:
    """The toolkit's CUDA release, "13.0": from `nvcc --version`, else from CUDART_VERSION in
    home/include/cuda_runtime_api.h (12090 -> "12.9"); None when neither tells."""
    if nvcc:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                 timeout=VERSION_TIMEOUT_S).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        if m := re.search(r"release (\d+)\.(\d+)", out):
            return f"{m.group(1)}.{m.group(2)}"
    if home:
        try:
            header = (Path(home) / "include" / "cuda_runtime_api.h").read_text(errors="replace")
        except OSError:
            return None
        if m := re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header):
            number = int(m.group(1))
            return f"{number // 1000}.{number % 1000 // 10}"
    return None


def read_architectures(path: Path = TOOLKITS_FILE) -> dict[str, list[str]]:
    """The variables of toolkits.mk: {"ARCHS_CUDA12.0": ["70", ...], ...} (make's `NAME := words`
    lines; comments and other lines ignored).  Raises OSError when the file cannot be read."""
    found = {}
    for line in Path(path).read_text().splitlines():
        if m := re.match(r"^([A-Z0-9_.]+)\s*:=\s*(.*?)\s*$", line):
            found[m.group(1)] = m.group(2).split()
    return found


def _key(release: str) -> tuple[int, int]:
    """"12.4" -> (12, 4); "12" -> (12, 999) (a major alone stands for its latest release)."""
    major, _, minor = str(release).partition(".")
    return int(major), int(minor) if minor else 999


def rows(path: Path = TOOLKITS_FILE) -> list[str]:
    """The release rows of toolkits.mk, oldest first: ["12.0", "12.8", "12.9", "13.0"]."""
    found = [k.removeprefix("ARCHS_CUDA") for k in read_architectures(path) if re.fullmatch(r"ARCHS_CUDA\d+\.\d+", k)]
    return sorted(found, key=_key)


def row(release: str | int | None, path: Path = TOOLKITS_FILE) -> str | None:
    """The row a toolkit of `release` ("12.4", or a major alone, 12: its latest) builds by: the
    latest row of the same major not after it ("12.0" for "12.4"); None for a release older than
    its major's first row, or of a major the file does not list (CUDA 11.8)."""
    if release is None or release == "":
        return None
    try:
        want = _key(str(release))
    except ValueError:
        return None
    same = [r for r in rows(path) if _key(r)[0] == want[0] and _key(r) <= want]
    return same[-1] if same else None


def architectures(release: str | int, path: Path = TOOLKITS_FILE) -> list[int]:
    """The compute capabilities (75 = 7.5) the kit supports with CUDA `release` ("12.4"; a major
    alone, 12: its latest release), oldest first; [] for a release the file does not cover."""
    found = row(release, path)
    return [int(a) for a in read_architectures(path)[f"ARCHS_CUDA{found}"]] if found else []


def first_release_for(cc: int, path: Path = TOOLKITS_FILE) -> str | None:
    """The oldest row whose toolkit builds for compute capability `cc` (120 -> "12.8"), or None."""
    return next((r for r in rows(path) if cc in architectures(r, path)), None)


def last_release_for(cc: int, path: Path = TOOLKITS_FILE) -> str | None:
    """The newest row whose toolkit builds for `cc` (70 -> "12.9": Volta's last), or None."""
    return next((r for r in reversed(rows(path)) if cc in architectures(r, path)), None)


def minimum_driver(major: int | str, path: Path = TOOLKITS_FILE) -> str | None:
    """The oldest Linux driver that runs what CUDA `major` builds ("580.65.06"), or None."""
    words = read_architectures(path).get(f"DRIVER_CUDA{_key(str(major))[0]}")
    return words[0] if words else None


def below_note(major: int | str, path: Path = TOOLKITS_FILE) -> str:
    """Why architectures below CUDA `major`'s oldest are not built (ARCHS_CUDA13_BELOW), or ""."""
    return " ".join(read_architectures(path).get(f"ARCHS_CUDA{_key(str(major))[0]}_BELOW", []))


def make_words(environ=None) -> str:
    """What lab.mk reads: 'NVCC CUDA_HOME RELEASE ROW' on one line (ROW: toolkits.mk's row of
    the release, "12.0" for "12.4"), '-' for what was not found."""
    env = os.environ if environ is None else environ
    nvcc = find_nvcc(env)
    home = cuda_home(env, nvcc)
    found = release(nvcc, home)
    return " ".join([nvcc or "-", str(home) if home else "-", found or "-", row(found) or "-"])


def main(argv: list[str]) -> int:
    """`toolkit.py make` prints make_words(); `toolkit.py why` prints why_no_nvcc()."""
    command = {"make": make_words, "why": why_no_nvcc}.get(" ".join(argv[1:]))
    if command is None:
        print("usage: toolkit.py make|why", file=sys.stderr)
        return 2
    print(command())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
