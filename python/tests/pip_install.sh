#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pip install ./python offline, with the interpreter's own setuptools, into a scratch
# folder, then import the installed module and use it: what a user's `pip install` does.
# Works on a copy of the sources, and checks that the build left them untouched.
set -euo pipefail
python=$1 source=$(realpath "$2") scratch=$(realpath -m "$3")
if ! { "$python" -c "import setuptools" && "$python" -m pip --version; } >/dev/null 2>&1; then
  echo "skipped: $python has no pip or setuptools (Debian: python3-pip, python3-setuptools)"
  exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch/src"
cp -r "$source/python" "$source/sync" "$source/include" "$source/scripts" "$scratch/src/"
rm -rf "$scratch/src/python/build" "$scratch/src/python/"*.egg-info "$scratch/src/python/dlsync/lib"
snapshot() { (cd "$scratch/src" && find . -printf '%p %s %T@\n' | LC_ALL=C sort); }
snapshot >"$scratch/before"
PIP_NO_INDEX=1 "$python" -m pip install --quiet --no-build-isolation --no-deps \
  --target "$scratch/site" "$scratch/src/python"
# The build happens in temporary folders: the sources stay as they were.
snapshot | diff "$scratch/before" - || { echo "FAIL: pip install wrote into the sources" >&2; exit 1; }
cd "$scratch"
PYTHONPATH="$scratch/site" PYTHONDONTWRITEBYTECODE=1 "$python" - <<'PY'
import dlsync, dlsync.testing
assert dlsync.__file__.startswith("site/") or "/site/" in dlsync.__file__, dlsync.__file__
assert dlsync.stream_from_arg((2, 0), None) == (1, True)
with dlsync.testing.SimulatedDevice() as sim:
    a, b = sim.stream(), sim.stream()
    buf = bytearray(16)
    sim.write(a, buf, 3)
    dlsync.export((2, 0), a, b.handle)
    sim.copy(b, buf, bytearray(16))
print("installed:", dlsync.__file__, "version", dlsync.__version__)
PY
