#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main demo on a fresh Debian machine: installs what it needs (as root), builds dlsync
# and runs the two-framework exchange demo. Arguments go to the demo (try --no-sync).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build-essential cmake
mkdir -p build
cmake -S . -B build/demo -DDL_SYNC_BUILD_TESTS=OFF -DDL_SYNC_BUILD_SAMPLES=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/demo.configure.log 2>&1 ||
  { cat build/demo.configure.log; exit 1; }
cmake --build build/demo --target dlsync_exchange_demo -j"$(nproc)" >/dev/null
exec build/demo/samples/exchange/dlsync_exchange_demo "$@"
