#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package as a user gets it, offline: an sdist built from a copy of the
# checkout, a wheel built from the unpacked sdist (neither build writes into its source
# tree), the wheel's contents (headers, dlsync.pxd, libdlsync.a, licence) and its
# extension's needs (libc and ld.so only), installed into a scratch folder; then a Cython
# and a C producer built against the installed package, tested on the simulated device
# (tests/producers), a C++ compile of dlsync_testing.h, and mypy --strict on a user of
# every public name (tests/typing_user.py), which then runs.
# Usage: package_check.sh PYTHON SOURCE_ROOT SCRATCH
set -euo pipefail
python=$1 source=$(realpath "$2") scratch=$(realpath -m "$3")
here=$(dirname "$(realpath "$0")")
missing=()
for module in setuptools pip build wheel Cython mypy numpy; do
  "$python" -c "import $module" >/dev/null 2>&1 || missing+=("$module")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "skipped: $python lacks ${missing[*]} (Debian: python3-setuptools python3-pip" \
    "python3-build python3-wheel cython3 python3-mypy python3-numpy)"
  exit 77
fi
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export PYTHONDONTWRITEBYTECODE=1
rm -rf "$scratch"
mkdir -p "$scratch/src"
# The checkout's files, as a clone has them (no build outputs).
cp -r "$source/python" "$source/sync" "$source/include" "$source/scripts" "$scratch/src/"
[ -f "$source/LICENSE" ] && cp "$source/LICENSE" "$scratch/src/"
rm -rf "$scratch/src/python/build" "$scratch/src/python/"*.egg-info "$scratch/src/python/dlsync/lib"
find "$scratch/src" -name __pycache__ -prune -exec rm -rf {} +
snapshot() { (cd "$1" && find . -printf '%p %s %T@\n' | LC_ALL=C sort); }
unchanged() { # folder, snapshot before, what ran
  if ! snapshot "$1" | diff "$2" - >"$scratch/tree.diff"; then
    echo "FAIL: $3 wrote into $1:" >&2
    cat "$scratch/tree.diff" >&2
    exit 1
  fi
}

echo "== sdist from the checkout"
snapshot "$scratch/src" >"$scratch/src.before"
"$python" -m build --sdist --no-isolation -o "$scratch/dist" "$scratch/src/python" >"$scratch/sdist.log" 2>&1 ||
  { cat "$scratch/sdist.log"; exit 1; }
unchanged "$scratch/src" "$scratch/src.before" "building the sdist"
sdist=$(ls "$scratch"/dist/dlsync-*.tar.gz)
mkdir "$scratch/unpacked"
tar -xzf "$sdist" -C "$scratch/unpacked"
tree=$(ls -d "$scratch"/unpacked/dlsync-*)
for f in setup.py pyproject.toml include/dlsync/version.h include/dlsync/dlsync.h sync/exchange.c \
  sync/sim/race.c dlsync/include/dlsync.pxd dlsync/include/dlsync_testing.h dlsync/include/dlsync_python.h \
  dlsync/binding.h build_backend/dlsync_build.py \
  dlsync/exports.map; do
  [ -f "$tree/$f" ] || { echo "FAIL: the sdist lacks $f" >&2; exit 1; }
done
if [ -f "$source/LICENSE" ]; then
  cmp "$source/LICENSE" "$tree/LICENSE" || { echo "FAIL: the sdist lacks LICENSE" >&2; exit 1; }
fi
[ "$(ls "$scratch/unpacked")" = "$(basename "$tree")" ] || { echo "FAIL: sdist has entries outside its folder" >&2; exit 1; }
echo "sdist: $(basename "$sdist"), $(tar -tzf "$sdist" | wc -l) entries"

echo "== wheel from the unpacked sdist"
snapshot "$tree" >"$scratch/tree.before"
"$python" -m pip wheel -q --no-build-isolation --no-deps -w "$scratch/wheels" "$tree" >"$scratch/wheel.log" 2>&1 ||
  { cat "$scratch/wheel.log"; exit 1; }
unchanged "$tree" "$scratch/tree.before" "building the wheel"
wheel=$(ls "$scratch"/wheels/dlsync-*.whl)
"$python" - "$wheel" "$source" <<'PY'
import os, sys, zipfile
wheel, source = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
need = ["dlsync/__init__.py", "dlsync/testing.py", "dlsync/_dlsync.pyi", "dlsync/py.typed",
        "dlsync/include/dlsync.pxd", "dlsync/include/dlsync_testing.h", "dlsync/include/dlsync_python.h",
        "dlsync/include/dlsync/dlsync.h", "dlsync/include/dlsync/version.h",
        "dlsync/include/dlsync/backend.h", "dlsync/lib/libdlsync.a"]
missing = [n for n in need if n not in names]
if not any(n.startswith("dlsync/_dlsync.") and n.endswith(".so") for n in names):
    missing.append("dlsync/_dlsync*.so")
if os.path.isfile(os.path.join(source, "LICENSE")) and not any(
        n.endswith(".dist-info/LICENSE") for n in names):
    missing.append("*.dist-info/LICENSE")
extra = [n for n in names if n.endswith((".c", "sim.h", "binding.h", "module.h"))]
assert not missing and not extra, f"wheel: missing {missing}, unexpected {extra}"
print(f"wheel: {os.path.basename(wheel)}, {len(names)} files")
PY
"$python" -m pip install -q --no-deps --target "$scratch/site" "$wheel"
so=$(ls "$scratch"/site/dlsync/_dlsync.*.so)
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for lib in $needed; do
  case $lib in
    libc.so.6 | ld-linux*.so.* | libpthread.so.0 | libdl.so.2) ;;
    *) echo "FAIL: the extension needs $lib (expected libc and ld.so only)" >&2; exit 1 ;;
  esac
done
if readelf -d "$so" | grep -qE "\((RPATH|RUNPATH)\)"; then
  echo "FAIL: the extension carries a run path" >&2; exit 1
fi
# its init function, and the tensor-event deleters other copies of dlsync recognise by name
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | LC_ALL=C sort | tr '\n' ' ')
expected="PyInit__dlsync dl_sync_legacy_tensor_event_deleter_v1 dl_sync_tensor_event_deleter_v1 "
[ "$exported" = "$expected" ] ||
  { echo "FAIL: the extension exports $exported(expected $expected)" >&2; exit 1; }
echo "extension: needs $needed; exports $exported"

echo "== producers against the installed package"
cp -r "$here/producers" "$scratch/producers"
cd "$scratch/producers"
PYTHONPATH="$scratch/site" "$python" setup.py -q build_ext --inplace >"$scratch/producers.log" 2>&1 ||
  { cat "$scratch/producers.log"; exit 1; }
for so in cy_producer.*.so c_producer.*.so; do
  # its own copy of dlsync stays private: of dlsync, only the tensor-event deleters (which
  # copies recognize by name) may be exported
  exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep "dl_sync" |
    grep -vxE "dl_sync_(legacy_)?tensor_event_deleter_v1" | tr '\n' ' ' || true)
  [ -z "$exported" ] || { echo "FAIL: $so exports $exported" >&2; exit 1; }
done
include=$(PYTHONPATH="$scratch/site" "$python" -c "import dlsync; print(dlsync.get_include())")
py_include=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
if command -v c++ >/dev/null; then
  c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$include" -I"$py_include" header_check.cpp
  echo "dlsync_testing.h and dlsync_python.h: compile as C++17"
fi
PYTHONPATH="$scratch/site:$scratch/producers" "$python" -m unittest -v test_producers \
  >"$scratch/test_producers.log" 2>&1 || { cat "$scratch/test_producers.log"; exit 1; }
grep -E "^(Ran|OK)" "$scratch/test_producers.log" | tr '\n' ' '
echo

echo "== mypy --strict on a user of every public name"
cd "$here"
PYTHONPATH="$scratch/site" "$python" - typing_user.py <<'PY'
import sys
import dlsync, dlsync.testing
text = open(sys.argv[1]).read()
unused = [f"{m.__name__}.{n}" for m in (dlsync, dlsync.testing) for n in m.__all__
          if f"{m.__name__}.{n}" not in text]
assert not unused, f"typing_user.py does not use {unused}"
PY
MYPYPATH="$scratch/site" "$python" -m mypy --strict --cache-dir "$scratch/mypy-cache" typing_user.py
MYPYPATH="$scratch/site" "$python" -m mypy --strict --cache-dir "$scratch/mypy-cache" -p dlsync
PYTHONPATH="$scratch/site" "$python" typing_user.py
echo "package checks passed"
