#!/usr/bin/env bash
# install-deps.sh -- make sure `make test` has what it needs: the Check library
# (libcheck, found through pkg-config), GNU patch and a Python 3 with pytest (and Hypothesis,
# which the class-grading tests use for generated student names; copydetect, which the
# similarity tests use, below).
#
# Installs Debian's packages `check`, `patch`, `python3-pytest` and `python3-hypothesis` when
# they are missing and we are root on a Debian-like system; otherwise says exactly what
# to install and exits 1 (Hypothesis alone is optional: without it the tests that need
# it are skipped, with the reason).  Also installs, when root on Debian, what the Slurm
# test needs (slurmctld, slurmd, slurm-client, munge); without them that one
# test is skipped; and Debian's nbclient and ipykernel for the notebook test.  On success
# prints, as its last line, the Python
# interpreter that has pytest (the Makefile runs pytest with it).
set -euo pipefail

missing=()
pkg-config --exists check 2>/dev/null || missing+=(check)
# GNU patch makes the known submissions kept as patches (tests/submissions/*/*/kernel.patch).
command -v patch >/dev/null 2>&1 || missing+=(patch)

python_with_pytest() {
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import pytest' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    return 1
}
python_with_pytest >/dev/null || missing+=(python3-pytest)
hypothesis_missing=
py=$(python_with_pytest || true)
if [[ -n $py ]] && ! "$py" -c 'import hypothesis' 2>/dev/null; then hypothesis_missing=python3-hypothesis; fi
[[ -n $py ]] || hypothesis_missing=python3-hypothesis

if [[ -n $hypothesis_missing && $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    missing+=("$hypothesis_missing")
fi

if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian packages: ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || true
        apt-get install -y -qq "${missing[@]}" >&2
    else
        echo "make test needs: ${missing[*]}" >&2
        echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
        echo "  Fedora:        sudo dnf install check-devel patch python3-pytest" >&2
        echo "  macOS:         brew install check && python3 -m pip install pytest" >&2
        echo "  (or pip:       python3 -m pip install --user pytest)" >&2
        exit 1
    fi
fi

# The instructor side's libraries, listed once in grader/requirements.txt (module, Debian package).
instructor_missing=()
py=$(python_with_pytest || true)
while read -r module package _; do
    [[ -z $module || $module == \#* ]] && continue
    [[ -n $py ]] && "$py" -c "import $module" 2>/dev/null || instructor_missing+=("$package")
done < "$(dirname "${BASH_SOURCE[0]}")/../grader/requirements.txt"
if ((${#instructor_missing[@]})) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages for the instructor tools: ${instructor_missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${instructor_missing[@]}"; } >&2 \
        || echo "install-deps.sh: could not install ${instructor_missing[*]}: the tests that need them will be skipped" >&2
fi

# Optional: a real one-node Slurm for tests/python/test_slurm.py (Debian 12: Slurm 22.05).  Installed
# when we are root on Debian; anywhere else that test is skipped and says why.  The packages'
# own services are not needed (the test starts its daemons on loopback ports of its own).
slurm=(slurmctld slurmd slurm-client munge)
slurm_missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${slurm[@]}"; do
        [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == "install ok installed" ]] || slurm_missing+=("$p")
    done
fi
if ((${#slurm_missing[@]})) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages for the Slurm test: ${slurm_missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${slurm_missing[@]}"; } >&2 \
        || echo "install-deps.sh: could not install ${slurm_missing[*]}: tests/python/test_slurm.py will be skipped" >&2
fi

# Optional: Debian's chromium, in which tests/python/test_html.py renders the report pages
# headless.  Installed when we are root on Debian; anywhere else those tests are skipped and say why.
if ! command -v chromium >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium for the report-page tests" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq chromium; } >&2 \
        || echo "install-deps.sh: could not install chromium: the browser tests of tests/python/test_html.py will be skipped" >&2
fi

# Optional: Debian's nbclient and ipykernel, with which tests/python/test_notebook.py runs
# notebooks/colab.ipynb top to bottom.  Installed when we are root on Debian; anywhere else that
# test is skipped and says why.
if ! python_with_pytest >/dev/null || ! "$(python_with_pytest)" -c 'import nbclient, ipykernel' 2>/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian's python3-nbclient and python3-ipykernel for the notebook test" >&2
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq python3-nbclient python3-ipykernel; } >&2 \
            || echo "install-deps.sh: could not install python3-nbclient: tests/python/test_notebook.py will be skipped" >&2
    fi
fi

# Optional: copydetect (PyPI), which `grade.py similarity` fingerprints the students' files with, for
# tests/python/test_similarity.py.  Its dependencies come from Debian's packages (numpy, matplotlib,
# jinja2, pygments, tqdm, and pip), copydetect itself from PyPI into build/similarity-deps with
# `pip install --target` (Debian's Python is externally managed; tests/python/conftest.py puts that
# folder on the path).  Installed when we are root on Debian; anywhere else, or without PyPI, the
# similarity tests are skipped and say why.
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
similarity_deps=$kit/build/similarity-deps
py=$(python_with_pytest || true)
if [[ -n $py ]] && ! PYTHONPATH=$similarity_deps "$py" -c 'import copydetect' 2>/dev/null \
        && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    similarity_pkgs=()
    for p in python3-pip python3-numpy python3-matplotlib python3-jinja2 python3-pygments python3-tqdm; do
        [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == "install ok installed" ]] || similarity_pkgs+=("$p")
    done
    if ((${#similarity_pkgs[@]})); then
        echo "installing Debian packages for the similarity test: ${similarity_pkgs[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${similarity_pkgs[@]}"; } >&2 \
            || echo "install-deps.sh: could not install ${similarity_pkgs[*]}" >&2
    fi
    echo "installing copydetect into $similarity_deps" >&2
    "$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$similarity_deps" \
        copydetect==0.5.0 >&2 \
        || echo "install-deps.sh: could not install copydetect: tests/python/test_similarity.py will be skipped" >&2
fi

# cuobjdump: the lab rules read the machine code of the linked programs with it (grading/sass.py).
# It ships with every CUDA toolkit; a toolkit installed without it (an nvcc alone, as on the CI
# machine) gets PyPI's nvidia-cuda-cuobjdump (and nvdisasm, which it runs) in build/cuobjdump, which the Makefile hands the tests
# as CUOBJDUMP.  Without it the tests that build real labs are skipped and say why.
toolkit_bin=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
cuobjdump_deps=$kit/build/cuobjdump
if [[ ! -x $toolkit_bin/cuobjdump ]] && ! command -v cuobjdump >/dev/null 2>&1 \
        && ! compgen -G "$cuobjdump_deps/nvidia/*/bin/cuobjdump" >/dev/null && [[ -n $py ]]; then
    echo "installing cuobjdump and nvdisasm (nvidia-cuda-cuobjdump, -nvdisasm) into $cuobjdump_deps" >&2
    "$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
        --target "$cuobjdump_deps" 'nvidia-cuda-cuobjdump==13.*' 'nvidia-cuda-nvdisasm==13.*' >&2 \
        || echo "install-deps.sh: could not install nvidia-cuda-cuobjdump: the real-build tests will be skipped" >&2
fi

pkg-config --exists check || { echo "Check is still not found by pkg-config" >&2; exit 1; }
command -v patch >/dev/null 2>&1 || { echo "GNU patch is still not installed" >&2; exit 1; }
python_with_pytest || { echo "no python3 with pytest found after installing python3-pytest" >&2; exit 1; }
