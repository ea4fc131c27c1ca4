#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The module built for the newest Python 3.12 or later on this machine (pyenv's,
# python.org's), and the suites that need no NumPy run with it: what changed from 3.12 on
# (os.fork's warning about threads, interpreters with their own GIL, text signatures) is
# tested there, not only with the system's Python.
# Usage: newest_python_suites.sh SOURCE SCRATCH C_COMPILER [LAUNCHER]
# Exit 77 when there is no such Python with its C headers.
set -euo pipefail
source=$1 scratch=$(realpath -m "$2") compiler=$3 launcher=${4:-}
here=$(dirname "$(realpath "$0")")
source "$here/pythons_here.sh"
mapfile -t candidates < <(pythons_here)
best="" best_version=0
for python in $(printf '%s\n' "${candidates[@]}" | sort -u); do
  [ -x "$python" ] || continue
  version=$("$python" - <<'PY' 2>/dev/null
import os, sys, sysconfig
headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
free_threaded = sysconfig.get_config_var("Py_GIL_DISABLED")
print(sys.version_info[0] * 100 + sys.version_info[1]
      if sys.version_info >= (3, 12) and headers and not free_threaded else 0)
PY
  ) || continue
  if [ "$version" -gt "$best_version" ]; then best=$python best_version=$version; fi
done
[ -n "$best" ] || { echo "skipped: no Python 3.12 or later with its C headers"; exit 77; }
echo "Python $("$best" -c 'import sys; print(sys.version.split()[0])') ($best)"
args=(-DPython3_EXECUTABLE="$best" -DCMAKE_C_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=RelWithDebInfo
      -DDL_SYNC_WERROR=ON -DDL_SYNC_BUILD_TESTS=OFF -DDL_SYNC_BUILD_SAMPLES=OFF)
[ -n "$launcher" ] && args+=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher")
cmake -S "$source" -B "$scratch" "${args[@]}" >"$scratch.log" 2>&1 &&
  cmake --build "$scratch" -j2 --target dlsync_python >>"$scratch.log" 2>&1 ||
  { cat "$scratch.log"; echo "FAIL: the module does not build for $best" >&2; exit 1; }
cd "$here"
PYTHONPATH="$scratch/python" PYTHONDONTWRITEBYTECODE=1 "$best" -m unittest -v test_hostile test_stubs test_api
