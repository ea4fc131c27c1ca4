#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages dlsync's build, tests and samples need (as root), if missing.
# Usage: scripts/install-deps.sh PACKAGE...   (none: the build and test set)
set -euo pipefail
packages=("$@")
[ ${#packages[@]} -gt 0 ] ||
  packages=(build-essential cmake pkg-config clang libclang-rt-dev valgrind libcmocka-dev
            libamdhip64-dev libdlpack-dev python3-dev python3-numpy python3-torch
            python3-pip python3-setuptools python3-wheel python3-build cython3 python3-mypy
            meson ninja-build python3-pytest gcc-mingw-w64-x86-64 codespell
            clang-format clang-tidy)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 1
fi
# Packages of another architecture (libcmocka-dev:arm64) come by multiarch.
for p in "${missing[@]}"; do
  case "$p" in
    *:*) arch=${p##*:}
         dpkg --print-foreign-architectures | grep -qx "$arch" || dpkg --add-architecture "$arch" ;;
  esac
done
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
