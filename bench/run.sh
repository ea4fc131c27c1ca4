#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the benchmarks (Release), runs each REPEATS times (default 5) and prints one
# table: median, min and max of every figure, with the machine it ran on. The C figures
# come from bench_*.c, the Python module's from bench_python.py (ratios to a bare Python
# call, measured side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-5}
build=build/bench
mkdir -p build
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DDL_SYNC_BUILD_BENCH=ON -DDL_SYNC_BUILD_TESTS=OFF \
  -DDL_SYNC_BUILD_SAMPLES=OFF >$build.configure.log 2>&1 || { cat $build.configure.log; exit 1; }
cmake --build $build -j"$(nproc)" >/dev/null
results=$(mktemp)
for ((i = 0; i < repeats; i++)); do
  $build/bench/bench_host >>"$results"
  $build/bench/bench_pool >>"$results"
  [ -x $build/bench/bench_copies ] && $build/bench/bench_copies >>"$results"
  [ -x $build/bench/bench_gpu ] && $build/bench/bench_gpu >>"$results"
  # The Python module, with the interpreter it was built for.
  python=$(sed -n 's/^_\{0,1\}Python3_EXECUTABLE:[A-Z]*=//p' $build/CMakeCache.txt | head -n 1)
  [ -n "$python" ] && [ -d $build/python/dlsync ] &&
    PYTHONPATH=$build/python "$python" bench/bench_python.py >>"$results"
done
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "machine: ${cpu:-unknown cpu}, $(nproc) cores, $(uname -sr); $repeats runs; $(date -u +%Y-%m-%d)"
grep -h -E '^(device|skipped)' "$results" | sort -u | awk -F'\t' '{print $1 ": " $3}'
echo
echo "| figure | median | min | max | unit |"
echo "|---|---:|---:|---:|---|"
grep -v -E '^(device|skipped)' "$results" | awk -F'\t' '
  !($1 in seen) { seen[$1] = 1; order[++n] = $1; unit[$1] = $3 }
  { values[$1] = values[$1] " " $2 }
  END {
    for (i = 1; i <= n; i++) {
      k = split(substr(values[order[i]], 2), v, " ")
      for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++) if (v[b] + 0 < v[a] + 0) { t = v[a]; v[a] = v[b]; v[b] = t }
      median = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "| %s | %.2f | %.2f | %.2f | %s |\n", order[i], median, v[1], v[k], unit[order[i]]
    }
  }'
rm -f "$results"
