#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the PyPI packages whose DLPack exchange tables the Python suites test
# (python/tests/test_exchange_tables.py), and hypothesis for the stateful property test
# (python/tests/test_stateful.py), pinned, into FOLDER (default build/pypi-site),
# for the interpreter the build tests with (PYTHON, default /usr/bin/python3): wheels only,
# each package without its dependencies but those listed here, so that what is downloaded
# stays bounded and Debian's own packages (numpy, torch 1.13) are left as they are. The
# tests put FOLDER ahead of the system's packages in their own process only.
#
# The frameworks the suites exchange with as peers, PyTorch, JAX (CPU) and NumPy 2, come from
# PyPI with their dependencies (PyTorch's Linux wheel is its CUDA build: with the nvidia-*
# wheels about 5 GB installed; it imports and works on a CPU-only machine for CPU tensors).
# They are installed once per pin set and interpreter into a folder outside the clone that
# persists between CI runs on one machine (DL_SYNC_PYPI_CACHE, default
# ~/.cache/dlsync-ci/peers-<python>-<hash of the pins>), and FOLDER/peers links to it. Where
# PyPI cannot be reached the script says so and goes on: those tests then skip with that
# reason. Usage: scripts/install-python-test-deps.sh [FOLDER]
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-build/pypi-site}
python=${PYTHON:-/usr/bin/python3}
pinned=(
  apache-tvm-ffi==0.1.15.post2
  typing-extensions==4.16.0 # tvm_ffi needs get_annotations (Debian 12's is older)
  cuda-core==1.2.2
  cuda-bindings==13.5.0 # cuda.core imports it; the driver is loaded only when used
  cuda-pathfinder==1.9.1
  hypothesis==6.170.27 # python/tests/test_stateful.py
  sortedcontainers==2.4.0 # hypothesis needs it
)
peers=(torch==2.15.0 "jax[cpu]==0.10.2" numpy==2.4.6)

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
pip_install() { # target, pip arguments...
  local target=$1
  shift
  "$python" -m pip install --quiet --only-binary=:all: --target "$target" --timeout 60 --retries 2 "$@"
}

tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
stamp=$folder/.pinned
if [ "$(cat "$stamp" 2>/dev/null)" != "$tag ${pinned[*]}" ]; then
  rm -rf "$folder.new"
  pip_install "$folder.new" --no-deps "${pinned[@]}"
  [ -e "$folder/peers" ] && mv "$folder/peers" "$folder.new/peers"
  rm -rf "$folder" && mv "$folder.new" "$folder"
  echo "$tag ${pinned[*]}" >"$stamp"
  echo "$tag" >"$folder/.python-tag" # the interpreter the wheels are for (pypi_site.py reads it)
  echo "installed into $folder: ${pinned[*]}"
fi

key=$(printf '%s\n' "$tag" "${peers[@]}" | sha256sum | cut -c1-12)
cache=${DL_SYNC_PYPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlsync-ci}/peers-$tag-$key
if [ ! -f "$cache/.complete" ]; then
  started=$(date +%s)
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.new"
  if pip_install "$cache.new" "${peers[@]}" >"$cache.log" 2>&1; then
    echo "${peers[*]}" >"$cache.new/.complete"
    rm -rf "$cache" && mv "$cache.new" "$cache"
    # The installs of other pin sets for this interpreter are not used again.
    for old in "$(dirname "$cache")/peers-$tag-"*; do
      [ "$old" = "$cache" ] || [ "$old" = "$cache.log" ] || rm -rf "$old"
    done
    echo "installed into $cache: ${peers[*]} ($(($(date +%s) - started)) s, $(du -sh "$cache" | cut -f1))"
  else
    rm -rf "$cache.new"
    echo "not installed: ${peers[*]} ($(tail -n 1 "$cache.log"); $cache.log says more):" \
      "the tests of those peers skip"
  fi
fi
if [ -f "$cache/.complete" ]; then
  ln -sfn "$cache" "$folder/peers"
  echo "peers: $folder/peers -> $cache (${peers[*]})"
else
  rm -f "$folder/peers"
fi
