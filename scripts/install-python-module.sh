#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Python module dlsync for PYTHON into the folder SITE (for PYTHONPATH), for
# scripts/gpu-check.sh, offline. Where PYTHON has its C headers, it is built from ./python
# with that interpreter's own setuptools (pip install --no-build-isolation). Where it has
# none, it is built the same way against headers of its version carried in
# DEPS/python-headers/cpXY/, or taken from a wheel for its version carried in DEPS/wheels
# (scripts/fetch-gpu-deps.sh with DL_SYNC_GPU_PYTHON_HEADERS or DL_SYNC_GPU_WHEEL_PYTHON).
# Builds in a copy of the sources, so the checkout stays as it is.
# Usage: install-python-module.sh PYTHON SITE [DEPS]   (DEPS: .gpu-deps)
# DL_SYNC_PYTHON_MODULE_FROM: auto (the default: the first of those that applies), source,
# carried-headers or wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$1 site=$(realpath -m "$2") deps=${3:-.gpu-deps}
from=${DL_SYNC_PYTHON_MODULE_FROM:-auto}
rm -rf "$site"
mkdir -p "$site"
has_headers() {
  "$python" - <<'PY'
import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
PY
}
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
headers=$(realpath -m "$deps/python-headers/$tag")
wheel=$(ls "$deps"/wheels/dlsync-*-"$tag"-*.whl 2>/dev/null | tail -n 1 || true)
if [ "$from" = auto ]; then
  if has_headers; then from=source
  elif [ -f "$headers/Python.h" ]; then from=carried-headers
  elif [ -n "$wheel" ]; then from=wheel
  else
    echo "install-python-module: $python ($tag) has no headers (Python.h) to build with, and" \
         "$deps has neither python-headers/$tag/ nor a wheel for $tag: on a machine with a" \
         "Python $tag that has them, run DL_SYNC_GPU_PYTHON_HEADERS=<that python>" \
         "scripts/fetch-gpu-deps.sh" >&2
    exit 1
  fi
fi
build_from_source() { # extra C flags
  if ! "$python" -c "import setuptools" 2>/dev/null || ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "install-python-module: $python has no pip or no setuptools" >&2
    exit 1
  fi
  local src="$site.src"
  rm -rf "$src"
  mkdir -p "$src"
  cp -r python sync include scripts "$src/"
  [ -f LICENSE ] && cp LICENSE "$src/"
  rm -rf "$src/python/build" "$src"/python/*.egg-info
  # CFLAGS reaches the compiler of setuptools' build_ext (after the interpreter's own).
  CFLAGS="${CFLAGS:-} $1" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    "$python" -m pip install --quiet --no-build-isolation --no-deps --target "$site" "$src/python"
  rm -rf "$src"
}
case "$from" in
  source)
    build_from_source ""
    how="built with $python's headers" ;;
  carried-headers)
    [ -f "$headers/Python.h" ] || { echo "install-python-module: no $headers/Python.h" >&2; exit 1; }
    build_from_source "-I$headers"
    how="built against the carried headers of Python $(cat "$headers/VERSION" 2>/dev/null || echo "$tag")" ;;
  wheel)
    [ -n "$wheel" ] || { echo "install-python-module: no wheel for $tag in $deps/wheels" >&2; exit 1; }
    "$python" -m zipfile -e "$wheel" "$site" # a wheel is a zip of what goes into site-packages
    how="from $wheel" ;;
  *)
    echo "install-python-module: DL_SYNC_PYTHON_MODULE_FROM=$from: expected auto, source, carried-headers or wheel" >&2
    exit 1 ;;
esac
HOW=$how PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c \
  "import dlsync, os; print('dlsync', dlsync.__version__, 'from', dlsync.__file__, '(' + os.environ['HOW'] + ')')"
