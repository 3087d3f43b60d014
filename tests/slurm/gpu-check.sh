#!/usr/bin/env bash
# gpu-check.sh -- on the GPU machine (no package registry there): unpack the Slurm packages that
# fetch-debs.sh downloaded into a prefix of their own, start a one-node Slurm whose gres.conf names
# the GPU(s), grade the known submissions through `grade.py slurm` and `grade.py class`, and
# compare the verdicts (tests/slurm/gpu_check.py says how).  Results go to OUT.
#
#     bash tests/slurm/gpu-check.sh [--debs DIR] [--prefix DIR] --out OUT [gpu_check.py options]
#
# --debs: the .deb files (default .device/slurm-debs); --prefix: where they are unpacked (default
# /opt/slurm-root; never /).  Run as root (Slurm's daemons and MUNGE run as the caller; the
# grader's sandbox wants root too), from the kit's root folder, with Check installed.
# On a machine whose cgroup v2 has no systemd to ask (no dbus: the lent H100, a Firecracker VM),
# slurmd 22.05 cannot start its cgroup plugin; give it a cgroup.conf that does without:
#     STENCIL_SLURM_CGROUP_CONF='CgroupPlugin=cgroup/v1' bash tests/slurm/gpu-check.sh ...
# (measured there on 2026-11-25: 7 gradings of labs 3 and 7 through Slurm and through grade.py
# class, the same verdicts, Slurm setting CUDA_VISIBLE_DEVICES=0 for each of its 4 GPU tasks).
set -euo pipefail

debs=.device/slurm-debs prefix=/opt/slurm-root out=""
rest=()
while (($#)); do
    case $1 in
        --debs) debs=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) rest+=("$1"); shift ;;
    esac
done
[[ -n $out ]] || { echo "usage: gpu-check.sh [--debs DIR] [--prefix DIR] --out OUT [gpu_check.py options]" >&2; exit 2; }
[[ $prefix != / ]] || { echo "gpu-check.sh: the prefix must not be /" >&2; exit 2; }
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
{
    echo "== $(date -u +%FT%TZ) on $(hostname): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | paste -sd';')"
    bash "$here/unpack-debs.sh" "$debs" "$prefix"
} 2>&1 | tee "$out/unpack.log"
export PYTHONUNBUFFERED=1
python3 "$here/gpu_check.py" --prefix "$prefix" --out "$out" "${rest[@]}"
