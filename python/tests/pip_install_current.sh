#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pip install ./python as a user does it today, with every Python 3.8+ on this machine
# (pyenv's, python.org's, the one given), each into a fresh venv:
#   isolated    pip install ./python: build isolation, the newest setuptools from PyPI
#   no-isolation  pip install --no-build-isolation ./python in a venv that holds the newest
#               setuptools (as one holding torch, which needs setuptools 77.0.3 or later)
#   sdist       the sdist built there, installed offline (no index) with build isolation
#               from a local folder holding that setuptools wheel
# Each install then imports the package, checks the wheel's licence file and runs
# `python -m dlsync.audit --simulated`. Needs PyPI: exit 77 when it cannot be reached.
# Usage: pip_install_current.sh PYTHON SOURCE SCRATCH
set -euo pipefail
given=$1 source=$(realpath "$2") scratch=$(realpath -m "$3")
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
rm -rf "$scratch"
mkdir -p "$scratch/src" "$scratch/wheels"
cp -r "$source/python" "$source/sync" "$source/include" "$source/scripts" "$source/LICENSE" "$scratch/src/"
rm -rf "$scratch/src/python/build" "$scratch/src/python/"*.egg-info "$scratch/src/python/dlsync/lib"

source "$(dirname "$(realpath "$0")")/pythons_here.sh"
mapfile -t found < <(pythons_here)
candidates=("$given" "${found[@]}")

# The installed package works: imported from the venv, LICENSE in its .dist-info, the audit.
check() { # venv, route
  local venv=$1 route=$2
  (cd "$scratch" && "$venv/bin/python" - <<'PY'
import glob, os, dlsync, dlsync.testing
assert os.sep + "site-packages" + os.sep in dlsync.__file__, dlsync.__file__
site = os.path.dirname(os.path.dirname(dlsync.__file__))
licences = glob.glob(os.path.join(site, "dlsync-*.dist-info", "**", "LICENSE"), recursive=True)
assert licences, "no LICENSE in the wheel's .dist-info"
assert "Apache License" in open(licences[0]).read()
assert dlsync.stream_from_arg((2, 0), None) == (1, True)
PY
  ) || { echo "FAIL: $route: the installed package" >&2; return 1; }
  (cd "$scratch" && "$venv/bin/python" -m dlsync.audit --simulated >"$venv.audit.log" 2>&1) ||
    { cat "$venv.audit.log"; echo "FAIL: $route: python -m dlsync.audit --simulated" >&2; return 1; }
}

tried=0 seen=" "
for python in "${candidates[@]}"; do
  [ -x "$python" ] || continue
  version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
  case "$seen" in *" $version "*) continue ;; esac
  seen="$seen$version "
  why=$("$python" -c '
import os, sys, sysconfig
if sys.version_info < (3, 8): print("older than 3.8")
elif not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")): print("no C headers")
else:
    import venv, ensurepip')  2>/dev/null || why="no venv or ensurepip module"
  if [ -n "$why" ]; then
    echo "skipped: Python $version ($python): $why"
    continue
  fi
  base=$scratch/$version
  started=$(date +%s)
  # isolated: pip fetches the newest setuptools that supports this Python into its build env.
  "$python" -m venv "$base-isolated"
  if ! "$base-isolated/bin/python" -m pip download --quiet --no-deps --only-binary=:all: \
       -d "$scratch/wheels/$version" setuptools >"$base.log" 2>&1; then
    cat "$base.log"
    echo "skipped: PyPI cannot be reached (pip download setuptools failed)"
    exit 77
  fi
  setuptools=$(basename "$scratch/wheels/$version"/setuptools-*.whl | cut -d- -f2)
  "$base-isolated/bin/python" -m pip install --quiet "$scratch/src/python" >"$base.log" 2>&1 ||
    { cat "$base.log"; echo "FAIL: Python $version: pip install ./python (build isolation, setuptools $setuptools)" >&2; exit 1; }
  check "$base-isolated" "Python $version isolated"
  # no-isolation: the venv's own setuptools, the newest.
  "$python" -m venv "$base-local"
  "$base-local/bin/python" -m pip install --quiet --no-index "$scratch/wheels/$version"/setuptools-*.whl
  "$base-local/bin/python" -m pip install --quiet --no-build-isolation --no-index "$scratch/src/python" \
    >"$base.log" 2>&1 ||
    { cat "$base.log"; echo "FAIL: Python $version: pip install --no-build-isolation ./python (setuptools $setuptools)" >&2; exit 1; }
  check "$base-local" "Python $version no-isolation"
  # sdist: made with that setuptools, then installed offline with build isolation.
  (cd "$scratch/src/python" && "$base-local/bin/python" setup.py -q sdist -d "$base-dist" >"$base.log" 2>&1) ||
    { cat "$base.log"; echo "FAIL: Python $version: setup.py sdist" >&2; exit 1; }
  "$python" -m venv "$base-sdist"
  PIP_NO_INDEX=1 PIP_FIND_LINKS="$scratch/wheels/$version" \
    "$base-sdist/bin/python" -m pip install --quiet "$base-dist"/dlsync-*.tar.gz >"$base.log" 2>&1 ||
    { cat "$base.log"; echo "FAIL: Python $version: pip install of the sdist offline" >&2; exit 1; }
  check "$base-sdist" "Python $version sdist"
  echo "Python $version: setuptools $setuptools: isolated, no-isolation and offline sdist installs work" \
    "($(($(date +%s) - started)) s)"
  rm -rf "$base"-*
  tried=$((tried + 1))
done
[ "$tried" -gt 0 ] || { echo "skipped: no Python 3.8+ with venv and C headers"; exit 77; }
rm -rf "$scratch"
