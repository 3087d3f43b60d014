#!/usr/bin/env bash
# cuda12-gpu.sh -- every lab's reference and starter built with CUDA 12.4 and graded through the
# real grader on a GPU machine that has neither network nor a CUDA 12 toolkit.
#
#   bash tests/cuda12-gpu.sh pack
#       here, where `make cuda12` laid CUDA 12.4 out in build/cuda/12.4 (Debian's nvcc, PyPI's
#       runtime and CUPTI: tests/cuda-toolkit.sh): writes build/cuda/12.4.tar.xz (about 35 MB;
#       the 130 MB folder does not travel), what the GPU machine needs besides the checkout.
#
#   bash tests/cuda12-gpu.sh grade SLUG [CUDA_ARCH ...]
#       on the GPU, with build/cuda/12.4.tar.xz carried along: unpacks it (once, into
#       $STENCIL_CUDA12_DIR, default /tmp/stencil-cuda12, readable by the sandbox's user), then for each
#       CUDA_ARCH word (default: 90 compute_70 compute_75 compute_80: machine code for sm_90, and
#       PTX alone of 7.0, 7.5 and 8.0, which the driver JIT-compiles when the programs load) and
#       each of reference and starter runs `make check IMPL=... CUDA_ARCH=...` with CUDA_HOME at
#       the 12.4 folder, records it (grade.py record-check, into build/cuda12-gpu/), and puts every
#       run recorded so far together as handouts/data/SLUG/cuda12.json (grade.py record-archs: row
#       ids NN/reference@compute_70, NN/starter@90; each build's "cuda" is 12.4).  Runs of an
#       earlier call stay recorded: the words can be split over several calls.  With $OUT set
#       (the device machine's folder that comes back) the record and the runs' logs are copied
#       there.
#
# Exits non-zero when a reference does not pass (a starter is expected to fail its tests).
set -euo pipefail
cd "$(dirname "$0")/.."
kit=$PWD
python=${PYTHON:-python3}
archive=$kit/build/cuda/12.4.tar.xz
# The grader runs the programs as an unprivileged user (base/sandbox.py), and they load libcudart.so.12
# and libcupti.so.12 from the toolkit at run time: it is unpacked where every user can read it.
unpacked=${STENCIL_CUDA12_DIR:-/tmp/stencil-cuda12}
home=$unpacked/12.4
runs=$kit/build/cuda12-gpu

case ${1:-} in
pack)
    [[ -f $kit/build/cuda/12.4/.complete ]] || { echo "cuda12-gpu.sh pack: no build/cuda/12.4: run make cuda12 first" >&2; exit 2; }
    tar -C "$kit/build/cuda" -cf - 12.4 | xz -6 -T0 > "$archive.tmp" && mv "$archive.tmp" "$archive"
    echo "carry build/cuda/12.4.tar.xz ($(du -h "$archive" | cut -f1))"
    ;;
grade)
    slug=${2:?usage: cuda12-gpu.sh grade SLUG [CUDA_ARCH ...]}
    shift 2
    words=("$@")
    [[ ${#words[@]} -gt 0 ]] || words=(90 compute_70 compute_75 compute_80)
    if [[ ! -f $home/.complete ]]; then
        [[ -f $archive ]] || { echo "cuda12-gpu.sh: neither $home nor $archive: carry build/cuda/12.4.tar.xz" >&2; exit 2; }
        mkdir -p "$unpacked"
        tar -C "$unpacked" -xJf "$archive"
        chmod -R a+rX "$unpacked"
    fi
    export CUDA_HOME=$home
    unset NVCC
    "$home/bin/nvcc" --version | grep -q "release 12.4" || { echo "cuda12-gpu.sh: $home/bin/nvcc is not CUDA 12.4" >&2; exit 2; }
    mkdir -p "$runs"
    status=0
    for word in "${words[@]}"; do
        for impl in reference starter; do
            echo "== CUDA 12.4, CUDA_ARCH=$word, IMPL=$impl"
            make --no-print-directory check IMPL=$impl CUDA_ARCH="$word" 2>&1 | tee "$runs/$impl@$word.log" || true
            if ! $python grader/grade.py record-check "$runs/$impl@$word.json" --impl $impl; then
                echo "cuda12-gpu.sh: no record of IMPL=$impl CUDA_ARCH=$word" >&2
                status=1
            fi
        done
    done
    pairs=()
    for f in "$runs"/*@*.json; do
        [[ -f $f ]] || continue
        name=$(basename "$f" .json)
        pairs+=("${name#*@}=$f")
    done
    $python grader/grade.py record-archs "handouts/data/$slug/cuda12.json" "${pairs[@]}"
    # Every reference row passed?
    $python - "handouts/data/$slug/cuda12.json" <<'EOF' || status=1
import json, sys
record = json.load(open(sys.argv[1]))
bad = [f"{r['id']}: {r['verdict']}" for r in record["rows"] if r["impl"] == "reference" and r["verdict"] != "pass"]
print("\n".join(bad) or f"every reference passed ({sum(r['impl'] == 'reference' for r in record['rows'])} gradings)")
sys.exit(1 if bad else 0)
EOF
    if [[ -n ${OUT:-} ]]; then
        cp "handouts/data/$slug/cuda12.json" "$runs"/*.log "$OUT/"
    fi
    exit $status
    ;;
*)
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
