#!/usr/bin/env bash
# cuda12-toolkit.sh DIR -- CUDA 12.9 from PyPI, for the build matrix of `make test`.
#
# Makes a virtual environment DIR/venv with NVIDIA's CUDA 12.9 wheels (nvcc, the runtime and
# CUPTI) and lays their files out as a toolkit folder, DIR/toolkit (bin/, include/, lib64/,
# nvvm/: what lab.mk and the Makefile expect under CUDA_HOME).  The wheels install under
# site-packages/nvidia/<part>/, one folder each.
#
# What PyPI gives (nvidia-cuda-nvcc-cu12 12.9.86): ptxas, libnvvm, libdevice and nvcc's crt
# headers, but not the nvcc driver, cicc, cudafe++, fatbinary or nvlink: no .cu file compiles with
# it.  The toolkit folder therefore has no bin/nvcc, and the matrix builds with it only what needs
# no nvcc: the harness's C side and every lab's C objects against CUDA 12.9's headers and CUPTI,
# and the Check unit suite linked with libcudart.so.12 (tests/python/test_toolkits.py).  A real
# CUDA 12 toolkit (CUDA12_HOME=/usr/local/cuda-12.9) builds everything.
#
# Idempotent (DIR/toolkit/.complete marks a finished layout).  Exits 0 with DIR/unavailable.txt
# holding why, when the wheels cannot be had (no network, no venv module): the tests then skip,
# saying so.
set -euo pipefail

dir=${1:?usage: cuda12-toolkit.sh DIR}
python=${PYTHON:-python3}
release=12.9
wheels=("nvidia-cuda-nvcc-cu12==$release.*" "nvidia-cuda-runtime-cu12==$release.*" "nvidia-cuda-cupti-cu12==$release.*")

mkdir -p "$dir"
toolkit=$dir/toolkit
[[ -f $toolkit/.complete ]] && exit 0
rm -f "$dir/unavailable.txt"

unavailable() {
    echo "$1" > "$dir/unavailable.txt"
    echo "cuda12-toolkit.sh: $1" >&2
    exit 0
}

if [[ ! -x $dir/venv/bin/python ]]; then
    "$python" -m venv "$dir/venv" >&2 2>"$dir/venv.log" \
        || unavailable "no virtual environment ($python -m venv failed: on Debian, apt-get install python3-venv)"
fi
"$dir/venv/bin/python" -m pip install -q --disable-pip-version-check "${wheels[@]}" >"$dir/pip.log" 2>&1 \
    || unavailable "pip could not install ${wheels[*]} ($(tail -n 1 "$dir/pip.log"))"

site=$("$dir/venv/bin/python" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))')/nvidia
rm -rf "$toolkit"
mkdir -p "$toolkit/bin" "$toolkit/include" "$toolkit/lib64"
for part in cuda_nvcc cuda_runtime cuda_cupti; do
    for f in "$site/$part"/include/*; do ln -sfn "$f" "$toolkit/include/"; done
    for f in "$site/$part"/lib/*; do [[ -e $f ]] && ln -sfn "$f" "$toolkit/lib64/"; done
done
for f in "$site"/cuda_nvcc/bin/*; do ln -sfn "$f" "$toolkit/bin/"; done
ln -sfn "$site/cuda_nvcc/nvvm" "$toolkit/nvvm"
# The unversioned names the linker looks for (-lcudart, -lcupti).
ln -sfn libcudart.so.12 "$toolkit/lib64/libcudart.so"
ln -sfn libcupti.so.12 "$toolkit/lib64/libcupti.so"
touch "$toolkit/.complete"
echo "CUDA $release wheels laid out in $toolkit" >&2
