#!/usr/bin/env bash
# fetch-debs.sh -- download Debian's Slurm and MUNGE packages, with the libraries they need,
# for a machine that reaches no package registry (the kit's GPU machine).
#
#     bash tests/slurm/fetch-debs.sh [DEST]        # default DEST: .device/slurm-debs
#
# Run it on a Debian 12 (bookworm) machine that reaches the registry; root is not needed
# (`apt-get download` only fetches).  It downloads slurmctld, slurmd, slurm-client, munge and
# the closure of their run-time dependencies (Depends and Pre-Depends, recursively), leaving
# out what every Linux system already has in some form: the C library family and packaging
# tools (SKIP below).  tests/slurm/unpack-debs.sh unpacks them into a prefix of their own on
# the other machine (never over /), skipping whatever that machine has installed.
# DEST/MANIFEST lists each file with its size and sha256.
set -euo pipefail

DEST=${1:-.device/slurm-debs}
ROOTS=(slurmctld slurmd slurm-client munge)
# Never unpacked into a prefix (the target's own C library must be the one used) or not
# needed to run the daemons (installers, packaging tools, init-script helpers, the elogind
# alternative to libsystemd0).
SKIP='^(libc6|libc-bin|libgcc-s1|libstdc\+\+6|gcc-12-base|dpkg|tar|passwd|adduser|debconf|cdebconf|install-info|libdebian-installer4|sysvinit-utils|lsb-base|ucf|sensible-utils|libnewt0\.52|libtextwrap1|libslang2|libelogind0|readline-common|libpam-modules|libpam-modules-bin|libsemanage-common|libsemanage2|libsepol2)$'

command -v apt-get >/dev/null || { echo "fetch-debs.sh: apt-get not found: run this on Debian 12" >&2; exit 2; }
. /etc/os-release
[[ ${VERSION_CODENAME:-} == bookworm ]] || echo "fetch-debs.sh: warning: this is ${PRETTY_NAME:-an unknown system}," \
    "not Debian 12 (bookworm): the packages will be this system's" >&2

packages=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
               --no-replaces --no-enhances "${ROOTS[@]}" | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$SKIP")
mkdir -p "$DEST"
cd "$DEST"
rm -f ./*.deb MANIFEST
# As root, apt hands downloads to its _apt user, who may not write here: keep root.
sandbox=()
[[ $(id -u) == 0 ]] && sandbox=(-o APT::Sandbox::User=root)
# shellcheck disable=SC2086  # one word per package
apt-get download -q "${sandbox[@]}" $packages
{
    echo "# Debian packages for a one-node Slurm (tests/slurm/fetch-debs.sh, $(date -u +%Y-%m-%d))"
    echo "# roots: ${ROOTS[*]}; file size sha256"
    for f in *.deb; do echo "$f $(stat -c %s "$f") $(sha256sum "$f" | cut -d' ' -f1)"; done
} > MANIFEST
echo "fetch-debs.sh: $(ls -1 ./*.deb | wc -l) packages, $(du -sh . | cut -f1), in $DEST"
