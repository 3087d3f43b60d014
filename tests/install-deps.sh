#!/usr/bin/env bash
# install-deps.sh -- make sure `make test` has what it needs: the Check library
# (libcheck, found through pkg-config) and a Python 3 with pytest.
#
# Installs Debian's packages `check` and `python3-pytest` when they are
# missing and we are root on a Debian-like system; otherwise says exactly what
# to install and exits 1.  On success prints, as its last line, the Python
# interpreter that has pytest (the Makefile runs pytest with it).
set -euo pipefail

missing=()
pkg-config --exists check 2>/dev/null || missing+=(check)

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

if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian packages: ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || true
        apt-get install -y -qq "${missing[@]}" >&2
    else
        echo "make test needs: ${missing[*]}" >&2
        echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
        echo "  Fedora:        sudo dnf install check-devel python3-pytest" >&2
        echo "  macOS:         brew install check && python3 -m pip install pytest" >&2
        echo "  (or pip:       python3 -m pip install --user pytest)" >&2
        exit 1
    fi
fi

pkg-config --exists check || { echo "Check is still not found by pkg-config" >&2; exit 1; }
python_with_pytest || { echo "no python3 with pytest found after installing python3-pytest" >&2; exit 1; }
