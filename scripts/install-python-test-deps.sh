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
# PyTorch's CPU wheel comes from PyTorch's CPU index (a PyTorch wheel from PyPI is its CUDA
# build, gigabytes with its libraries) into FOLDER/torch, with its dependencies. Where that
# index cannot be reached the script says so and goes on: the PyTorch tests then skip with
# that reason. Usage: scripts/install-python-test-deps.sh [FOLDER]
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
torch_pin=torch==2.10.0+cpu
torch_index=https://download.pytorch.org/whl/cpu

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
pip_install() { # target, pip arguments...
  local target=$1
  shift
  "$python" -m pip install --quiet --only-binary=:all: --target "$target" --timeout 60 --retries 2 "$@"
}

stamp=$folder/.pinned
if [ "$(cat "$stamp" 2>/dev/null)" != "${pinned[*]}" ]; then
  rm -rf "$folder.new"
  pip_install "$folder.new" --no-deps "${pinned[@]}"
  [ -d "$folder/torch" ] && mv "$folder/torch" "$folder.new/torch"
  rm -rf "$folder" && mv "$folder.new" "$folder"
  echo "${pinned[*]}" >"$stamp"
  echo "installed into $folder: ${pinned[*]}"
fi

torch_stamp=$folder/torch/.pinned
if [ "$(cat "$torch_stamp" 2>/dev/null)" != "$torch_pin" ]; then
  rm -rf "$folder/torch"
  if pip_install "$folder/torch" --index-url "$torch_index" "$torch_pin" >"$folder/torch.log" 2>&1; then
    echo "$torch_pin" >"$torch_stamp"
    echo "installed into $folder/torch: $torch_pin"
  else
    rm -rf "$folder/torch"
    echo "not installed: $torch_pin from $torch_index ($(tail -n 1 "$folder/torch.log");" \
      "$folder/torch.log says more): the PyTorch table tests skip"
  fi
fi
