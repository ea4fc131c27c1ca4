#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per exchange, counted by callgrind (valgrind): figures that do not move with
# the machine's load. Release build, shared library, over the null backend. The count is
# what runs in dlsync's calls (building the arguments with dl_sync_stream_view and
# dl_sync_stream_arg_int included) and in the backend's calls; the benchmark's own loop
# is left out. Usage: bench/instructions.sh [build folder]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench-instructions}
runs=2000
command -v valgrind >/dev/null || { echo "instructions: valgrind is not installed" >&2; exit 1; }
mkdir -p "$(dirname "$build")"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDL_SYNC_BUILD_BENCH=ON \
  -DDL_SYNC_BUILD_TESTS=OFF -DDL_SYNC_BUILD_SAMPLES=OFF -DDL_SYNC_BUILD_PYTHON=OFF \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target bench_instructions -j"$(nproc)" >/dev/null
echo "| exchange | instructions | backend calls | event creations |"
echo "|---|---:|---:|---:|"
for kind in same minus_one cross group; do
  out=$(mktemp)
  summary=$(valgrind --tool=callgrind --toggle-collect=measure --callgrind-out-file="$out" \
    "$build/bench/bench_instructions" $kind $runs 2>/dev/null)
  # Everything counted, less the benchmark's own functions (measure and the exchange's).
  total=$(callgrind_annotate "$out" 2>/dev/null | awk -v k=$kind '
    { n = $1; gsub(",", "", n) }
    /PROGRAM TOTALS/ { t = n }
    /bench_instructions\]$/ && ($0 ~ ":measure " || $0 ~ ":" k " ") { t -= n }
    END { print t }')
  rm -f "$out"
  calls=$(echo "$summary" | cut -f3 | cut -d' ' -f1)
  created=$(echo "$summary" | cut -f4 | cut -d' ' -f1)
  case $kind in
    same) name="same stream" ;; minus_one) name="stream=-1" ;; cross) name="cross-stream" ;;
    group) name="f(a,b,c) as a group" ;;
  esac
  awk -v n="$name" -v t="$total" -v r=$runs -v c="$calls" -v e="$created" \
    'BEGIN { printf "| %s | %.0f | %s | %s |\n", n, t / r, c, e }'
done
