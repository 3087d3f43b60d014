#!/usr/bin/env bash
# unpack-debs.sh -- unpack the packages of fetch-debs.sh into a prefix of their own.
#
#     bash tests/slurm/unpack-debs.sh [--all] DEBS_DIR PREFIX      # e.g. .device/slurm-debs /opt/slurm-root
#
# Each package is extracted with `dpkg -x` under PREFIX (never over /, so nothing the machine
# has is replaced), except a package this machine already has installed (dpkg's status
# "install ok installed"): its files are already here.  --all extracts every package anyway
# (to try the prefix on a machine that has them).  Prints, as its last line, the library
# folders to put on the library path of Slurm's programs (tests/slurm/minislurm.py finds
# them itself from PREFIX).
set -euo pipefail

all=0
if [[ ${1:-} == --all ]]; then all=1; shift; fi
(($# == 2)) || { echo "usage: unpack-debs.sh [--all] DEBS_DIR PREFIX" >&2; exit 2; }
debs=$1 prefix=$2
compgen -G "$debs/*.deb" >/dev/null || { echo "unpack-debs.sh: no .deb file in $debs" \
    "(run tests/slurm/fetch-debs.sh on a machine that reaches the registry)" >&2; exit 2; }
command -v dpkg-deb >/dev/null || { echo "unpack-debs.sh: dpkg-deb not found" >&2; exit 2; }
mkdir -p "$prefix"
unpacked=() skipped=()
for f in "$debs"/*.deb; do
    pkg=$(dpkg-deb -f "$f" Package)
    if ((!all)) && [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) == "install ok installed" ]]; then
        skipped+=("$pkg")
        continue
    fi
    dpkg -x "$f" "$prefix"
    unpacked+=("$pkg")
done
echo "unpack-debs.sh: unpacked into $prefix: ${unpacked[*]:-nothing}" >&2
echo "unpack-debs.sh: already installed here, skipped: ${skipped[*]:-none}" >&2
find "$prefix" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:
