#!/usr/bin/env bash
# cuda-toolkit.sh RELEASE DIR -- an older CUDA toolkit for the build matrix of `make test`, laid
# out from Debian's non-free component and PyPI, without touching the machine's apt sources.
#
#   RELEASE 12.4: nvidia-cuda-toolkit 12.4.131 of Debian trixie/non-free
#   RELEASE 11.8: nvidia-cuda-toolkit 11.8.89 of Debian bookworm/non-free
#
# The .deb carries the compiler (nvcc, cicc, cudafe++, ptxas, fatbinary, nvlink, cuobjdump and
# nvcc's crt stubs) and libdevice; the headers, the runtime (libcudart.so) and CUPTI come from
# NVIDIA's wheels of the same release on PyPI (nvidia-cuda-{runtime,nvcc,cupti,cccl}-cuXX).  Debian's
# headers and static runtime (nvidia-cuda-dev, 934 MB) are not needed: lab.mk links the runtime
# shared when the toolkit has no libcudart_static.a.
#
# DIR/cache/ keeps what was downloaded (apt's lists, the .deb, the wheels): a second run
# downloads nothing.  DIR/RELEASE/ is the toolkit folder (bin/ with its own nvcc.profile,
# include/, lib64/, nvvm/libdevice/), what CUDA_HOME names; DIR/RELEASE/.complete marks a finished
# layout (idempotent).  apt-get runs with a sources file, lists and cache of its own under
# DIR/cache/apt (-oDir::Etc::SourceList, -oDir::State::Lists, -oDir::Cache): the machine's
# sources and package state are read, never written.
#
# Exits 0 with DIR/RELEASE.unavailable holding why, when the parts cannot be had (no network, no
# apt-get or dpkg-deb, no pip): the matrix's tests of that release then skip, saying so.
set -euo pipefail

release=${1:?usage: cuda-toolkit.sh RELEASE DIR}
dir=${2:?usage: cuda-toolkit.sh RELEASE DIR}
python=${PYTHON:-python3}
case $release in
    12.4) deb_version=12.4.131~12.4.1-2 suite=trixie cu=cu12
          wheels=(nvidia-cuda-nvcc-cu12==12.4.131 nvidia-cuda-runtime-cu12==12.4.127 nvidia-cuda-cupti-cu12==12.4.127
                  nvidia-cuda-cccl-cu12==12.4.127.post1) ;;
    11.8) deb_version=11.8.89~11.8.0-5~deb12u1 suite=bookworm cu=cu11
          wheels=(nvidia-cuda-nvcc-cu11==11.8.89 nvidia-cuda-runtime-cu11==11.8.89 nvidia-cuda-cupti-cu11==11.8.87
                  nvidia-cuda-cccl-cu11==11.8.89.post1) ;;
    *) echo "cuda-toolkit.sh: release $release is not one this script lays out (12.4, 11.8)" >&2; exit 2 ;;
esac

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
toolkit=$dir/$release
# .complete holds this script's digest: a layout made by an earlier version of it is made again.
stamp=$(sha256sum "${BASH_SOURCE[0]}" | cut -d" " -f1)
[[ -f $toolkit/.complete && $(cat "$toolkit/.complete") == "$stamp" ]] && exit 0
rm -f "$dir/$release.unavailable"
cache=$dir/cache
log=$dir/$release.log
: > "$log"

unavailable() {
    echo "$1" > "$dir/$release.unavailable"
    echo "cuda-toolkit.sh: CUDA $release: $1" >&2
    exit 0
}

for tool in apt-get dpkg-deb; do
    command -v $tool >/dev/null || unavailable "no $tool here (Debian's nvidia-cuda-toolkit .deb is how the toolkit comes)"
done
"$python" -m pip --version >/dev/null 2>&1 || unavailable "no pip for $python (apt-get install python3-pip)"

# ---- the .deb, from a sources file of our own --------------------------------------------
apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$cache/debs"
deb_glob="$cache/debs/nvidia-cuda-toolkit_${deb_version}_*.deb"
deb=$(compgen -G "$deb_glob" || true)
if [[ -z $deb ]]; then
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [[ -f $keyring ]] || unavailable "no $keyring (the debian-archive-keyring package) to check Debian's signatures"
    echo "deb [signed-by=$keyring] http://deb.debian.org/debian $suite non-free" > "$apt/$suite.list"
    opts=(-q -oDir::Etc::SourceList="$apt/$suite.list" -oDir::Etc::SourceParts=/dev/null
          -oDir::State::Lists="$apt/lists" -oDir::Cache="$apt" -oDir::Cache::Archives="$apt/archives"
          -oAPT::Sandbox::User="$(id -un)" -oAcquire::Retries=2)
    apt-get "${opts[@]}" update >>"$log" 2>&1 \
        || unavailable "apt-get update of Debian's $suite non-free failed (no network?): $(tail -n 1 "$log")"
    (cd "$cache/debs" && apt-get "${opts[@]}" download "nvidia-cuda-toolkit=$deb_version") >>"$log" 2>&1 \
        || unavailable "apt-get download nvidia-cuda-toolkit=$deb_version failed: $(tail -n 1 "$log")"
    deb=$(compgen -G "$deb_glob" || true)
    [[ -n $deb ]] || unavailable "apt-get download left no $deb_glob"
fi

# ---- the wheels ------------------------------------------------------------------------------
mkdir -p "$cache/wheels"
"$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 -d "$cache/wheels" "${wheels[@]}" >>"$log" 2>&1 \
    || unavailable "pip download ${wheels[*]} failed (no network?): $(tail -n 1 "$log")"

# ---- the layout ----------------------------------------------------------------------------
stage=$dir/$release.stage
rm -rf "$stage" "$toolkit"
mkdir -p "$stage" "$toolkit/bin" "$toolkit/include" "$toolkit/lib64" "$toolkit/nvvm"
dpkg-deb -x "$deb" "$stage/deb"
ours=$stage/deb/usr/lib/nvidia-cuda-toolkit
for f in nvcc cicc; do mv "$ours/bin/$f" "$toolkit/bin/"; done
mv "$ours/bin/crt" "$toolkit/bin/crt"
for f in cudafe++ ptxas fatbinary nvlink cuobjdump bin2c; do mv "$stage/deb/usr/bin/$f" "$toolkit/bin/"; done
mv "$ours/libdevice" "$toolkit/nvvm/libdevice"
for part in nvcc runtime cupti cccl; do
    "$python" -m zipfile -e "$(compgen -G "$cache/wheels/nvidia_cuda_${part}_${cu}-*.whl" | head -n 1)" "$stage/whl"
done
whl=$stage/whl/nvidia
# cuda_cccl: libcu++ (nv/target, cuda/barrier), CUB and Thrust, which the runtime's own headers
# include (cuda_awbarrier_helpers.h): without them a build would take whatever CCCL the compiler's
# default folders hold (another toolkit's, /usr/local/include).
for part in cuda_nvcc cuda_runtime cuda_cupti cuda_cccl; do
    cp -a "$whl/$part/include/." "$toolkit/include/"
done
# The runtime and CUPTI alone (CUPTI's profiling-host libraries are not what the launch audit needs).
cp -a "$whl"/cuda_runtime/lib/libcudart.so.* "$whl"/cuda_cupti/lib/libcupti.so.* "$toolkit/lib64/"
rm -f "$toolkit"/include/__init__.py
major=${release%%.*}
# The unversioned names the linker looks for (-lcudart, -lcupti).
ln -sfn "libcudart.so.$major" "$toolkit/lib64/libcudart.so"
ln -sfn "$(cd "$toolkit/lib64" && ls libcupti.so.* | head -n 1)" "$toolkit/lib64/libcupti.so"
# nvcc reads bin/nvcc.profile: where cicc and the crt stubs are (bin/), libdevice, the headers
# and the libraries, all relative to nvcc's own folder.
cat > "$toolkit/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH            += $(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
EOF
rm -rf "$stage"
"$toolkit/bin/nvcc" --version | grep -q "release $release" \
    || unavailable "the laid-out nvcc does not say release $release: $("$toolkit/bin/nvcc" --version 2>&1 | tail -n 1)"
echo "$stamp" > "$toolkit/.complete"
echo "CUDA $release laid out in $toolkit ($(du -sh "$toolkit" | cut -f1))" >&2
