#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pip install ./python offline (pip_install.sh) with every other Python 3 on this machine
# that can build it: pyenv's and python.org's builds, whose setuptools (58 to 65 in 3.9 to
# 3.11) has no bdist_wheel of its own and which have no wheel package. Those without
# setuptools (3.12 and later ship none) have the module's C compiled against their
# headers instead; those without headers are listed as skipped.
# Exit 77 when no such Python is found.
set -euo pipefail
here=$(dirname "$(realpath "$0")")
source=$1 scratch=$(realpath -m "$2")
source "$here/pythons_here.sh"
mapfile -t candidates < <(pythons_here)
tried=0
for python in $(printf '%s\n' "${candidates[@]}" | sort -u); do
  [ -x "$python" ] || continue
  version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
  why=$("$python" - <<'PY'
import os, sys, sysconfig
if sys.version_info < (3, 8):
    print("older than 3.8")
elif not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    print("no C headers")
else:
    try:
        import setuptools
    except ImportError:
        print("no setuptools")
PY
  )
  if [ "$why" = "no setuptools" ] && command -v cc >/dev/null; then
    # Nothing to install with, but the module's C is held to this version's headers.
    include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    for file in "$source"/python/dlsync/*.c; do
      # The include folders setup.py gives the extension (sync/: the audit's driver gate).
      cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -DDL_SYNC_BUILDING_LIBRARY -I"$source/include" \
        -I"$source/sync" -I"$include" "$file" ||
        { echo "FAIL: $file against Python $version's headers" >&2; exit 1; }
    done
    echo "Python $version: no setuptools to install with; the module's C compiles against its headers"
    continue
  fi
  if [ -n "$why" ]; then
    echo "skipped: Python $version ($python): $why"
    continue
  fi
  kit=$("$python" -c '
import setuptools
try:
    import wheel
    w = "wheel " + wheel.__version__
except ImportError:
    w = "no wheel"
print("setuptools", setuptools.__version__ + ",", w)')
  bash "$here/pip_install.sh" "$python" "$source" "$scratch/$version" >"$scratch.log" 2>&1 ||
    { cat "$scratch.log"; echo "FAIL: Python $version ($kit)" >&2; exit 1; }
  echo "Python $version ($kit): $(tail -n 1 "$scratch.log")"
  tried=$((tried + 1))
done
[ "$tried" -gt 0 ] || { echo "skipped: no other Python 3 to build with"; exit 77; }
rm -rf "$scratch" "$scratch.log"
