#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches, on a machine with apt, what scripts/gpu-check.sh needs on a GPU machine that has
# no package registry: cmocka's runtime and development packages (and pkg-config's, for a
# machine without pkg-config), as .deb files in .gpu-deps/. Copy that folder along with the
# checkout; gpu-check.sh unpacks the packages into a private prefix under its build folder
# when cmocka is not installed there (docs/gpu.md).
#
# For a GPU machine whose Python has no headers to build the Python module dlsync with:
# - DL_SYNC_GPU_PYTHON_HEADERS=<python> copies that interpreter's C headers into
#   .gpu-deps/python-headers/cpXY/; the module is then built there against them (headers
#   of the same major.minor version: CPython keeps its ABI within one);
# - DL_SYNC_GPU_WHEEL_PYTHON=<python> builds a wheel of the module for that interpreter into
#   .gpu-deps/wheels/ (it fits that Python version and architecture only).
#
# Usage: scripts/fetch-gpu-deps.sh [PACKAGE...]   (none: the default set below)
# Environment: DL_SYNC_GPU_DEPS (folder) [.gpu-deps], DL_SYNC_GPU_PYTHON_HEADERS [none],
# DL_SYNC_GPU_WHEEL_PYTHON [none].
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${DL_SYNC_GPU_DEPS:-.gpu-deps}
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(libcmocka0 libcmocka-dev pkgconf-bin libpkgconf3)
command -v apt-get >/dev/null || { echo "fetch-gpu-deps: needs apt-get (a Debian or Ubuntu machine)" >&2; exit 1; }

mkdir -p "$dest"
dest=$(realpath "$dest")
rm -f "$dest"/*.deb
# apt-get download writes into the current directory, as the calling user: nothing is
# installed, and nothing outside $dest is written.
if ! (cd "$dest" && apt-get download "${packages[@]}"); then
  echo "fetch-gpu-deps: apt-get download failed (run apt-get update first, as root?)" >&2
  exit 1
fi
# What the packages are, from their own control data.
for deb in "$dest"/*.deb; do
  printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
    "$(dpkg-deb -f "$deb" Architecture)"
done | tee "$dest/PACKAGES"

if [ -n "${DL_SYNC_GPU_PYTHON_HEADERS:-}" ]; then
  python=$DL_SYNC_GPU_PYTHON_HEADERS
  tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [ -f "$include/Python.h" ] || { echo "fetch-gpu-deps: $python has no headers in $include" >&2; exit 1; }
  rm -rf "$dest/python-headers/$tag"
  mkdir -p "$dest/python-headers/$tag"
  cp -r "$include"/. "$dest/python-headers/$tag/"
  "$python" -c 'import sys; print(sys.version.split()[0])' >"$dest/python-headers/$tag/VERSION"
  echo "python headers: $tag ($(cat "$dest/python-headers/$tag/VERSION")) from $include"
fi

if [ -n "${DL_SYNC_GPU_WHEEL_PYTHON:-}" ]; then
  python=$DL_SYNC_GPU_WHEEL_PYTHON
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # A copy of the sources: the build writes next to setup.py (build/, *.egg-info).
  cp -r python sync include scripts "$scratch/"
  [ -f LICENSE ] && cp LICENSE "$scratch/"
  rm -rf "$scratch/python/build" "$scratch"/python/*.egg-info
  mkdir -p "$dest/wheels"
  isolation=(--no-build-isolation)
  "$python" -c "import setuptools" 2>/dev/null || isolation=() # pip fetches setuptools then
  "$python" -m pip wheel --quiet --no-deps "${isolation[@]}" -w "$dest/wheels" "$scratch/python"
  ls "$dest/wheels"
fi
echo "fetch-gpu-deps: done; copy $(basename "$dest")/ along with the checkout to the GPU machine"
