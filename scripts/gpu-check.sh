#!/usr/bin/env bash
# One command for a GPU machine: builds dlsync with CUDA, runs the GPU suites (ctest -L gpu),
# the other suites on that build and the benchmarks, and ends with one line per GPU suite
# and a verdict. It never runs past a hard deadline (330 s, build included).
#
# Verdicts: PASSED; FAILED (exit 1); SKIPPED (exit 0) only when neither `nvidia-smi -L`
# nor `rocm-smi` lists a GPU. Where one does, a suite that skips is a failure, printed with
# the runtime's reason (a driver too old for the toolkit, for instance).
#
# Environment (defaults in brackets):
#   DL_SYNC_GPU_CHECK_DEADLINE  seconds for the whole script [330]
#   DL_SYNC_GPU_CHECK_BUILD     build directory [build/gpu]
#   DL_SYNC_GPU_CHECK_STEPS     steps to run [deps build suites others bench]
#   CUDAToolkit_ROOT            [/usr/local/cuda]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${DL_SYNC_GPU_CHECK_DEADLINE:-330}
deadline=$((SECONDS + limit))
report_reserve=4 # seconds kept for the report; timeout's --kill-after comes out of it too
build=${DL_SYNC_GPU_CHECK_BUILD:-build/gpu}
steps=" ${DL_SYNC_GPU_CHECK_STEPS:-deps build suites others bench} "
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
export PATH="$PATH:$cuda_root/bin"
failures=()
deadline_hit=0
exec 3>&2 # the deadline's messages reach the terminal even from a redirected command

# Runs a command with what is left before the deadline. Never `timeout 0` (no limit) or a
# negative value (a usage error): with under a second left the command does not run.
within() {
  local left=$((deadline - report_reserve - SECONDS))
  if [ "$left" -lt 1 ]; then
    echo "deadline: ${limit}s reached, not running: $*" >&3
    deadline_hit=1
    return 124
  fi
  timeout --kill-after=2 "$left" "$@"
  local status=$?
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    echo "deadline: ${limit}s reached while running: $*" >&3
    deadline_hit=1
  fi
  return $status
}
step() { [[ "$steps" == *" $1 "* ]]; }
log_dir=$build
mkdir -p "$log_dir"

echo "== GPUs listed"
# nvidia-smi -L prints "GPU <index>: <name> (UUID: ...)" per GPU; rocm-smi --showid prints
# "GPU[<index>]<tab>: Device ID: ..." per GPU. Anything else (no driver, no device) lists none.
listed="" listed_vendors=""
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia=$(within nvidia-smi -L 2>/dev/null | grep -E '^GPU [0-9]+:')
  [ -n "$nvidia" ] && listed=$nvidia listed_vendors=nvidia
fi
if command -v rocm-smi >/dev/null 2>&1; then
  amd=$(within rocm-smi --showid 2>/dev/null | grep -E '^GPU\[[0-9]+\]')
  [ -n "$amd" ] && listed=$(printf '%s\n%s' "$listed" "$amd" | grep .) listed_vendors="$listed_vendors amd"
fi
if [ -n "$listed" ]; then
  echo "$listed"
  [[ "$listed_vendors" == *nvidia* ]] &&
    within nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
else
  echo "none (no nvidia-smi or rocm-smi, or they list no GPU): suites that skip are reported as skipped"
fi

if step deps && [ "$(id -u)" -eq 0 ] && ! dpkg -s libcmocka-dev cmake pkg-config >/dev/null 2>&1; then
  echo "== packages"
  within bash scripts/install-deps.sh build-essential cmake pkg-config libcmocka-dev ||
    failures+=("installing packages")
fi

if step build; then
  echo "== build (Release) in $build"
  configure=(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDL_SYNC_BUILD_BENCH=ON
             -DDL_SYNC_BUILD_PYTHON=OFF)
  if [ -x "$cuda_root/bin/nvcc" ]; then
    echo "nvcc: $("$cuda_root/bin/nvcc" --version | grep -E '^Cuda compilation tools')"
    configure+=(-DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")
  else
    echo "nvcc: not found under $cuda_root (set CUDAToolkit_ROOT)"
  fi
  if within "${configure[@]}" >"$log_dir/configure.log" 2>&1 &&
     within cmake --build "$build" -j"$(nproc)" >"$log_dir/build.log" 2>&1; then
    grep -E "dlsync (backends|GPU suites)" "$log_dir/configure.log"
  else
    tail -30 "$log_dir/configure.log" "$log_dir/build.log" 2>/dev/null
    failures+=("build")
  fi
fi

suite_lines=()
suites_ran=0
if step suites && [[ " ${failures[*]-} " != *" build "* ]]; then
  echo "== GPU suites (ctest -L gpu)"
  within ctest --test-dir "$build" -L gpu -V >"$log_dir/gpu-suites.log" 2>&1
  ctest_status=$?
  suites_ran=1
  grep -E "^[0-9]+: (.*: summary:|.*skipped:|\[  FAILED  \] [a-z]|.*(expected the race|timed out|ran before|wrong values|another thread|events created|device [0-9]:))" \
    "$log_dir/gpu-suites.log" | sed 's/^[0-9]*: /  /' | awk '!seen[$0]++' | head -60
  # One line per suite from ctest's result lines ("1/4 Test  #9: name .....   Passed  0.1 sec").
  results=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#([0-9]+): ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+( Run)?).*/\1 \2 \4/p' \
    "$log_dir/gpu-suites.log")
  if [ $ctest_status -eq 124 ] || [ $ctest_status -eq 137 ]; then
    deadline_hit=1
    suite_lines+=("(all): stopped at the deadline; results so far are above and in $log_dir/gpu-suites.log")
  elif [ -z "$results" ]; then
    if [ $ctest_status -ne 0 ]; then failures+=("GPU suites: ctest exited $ctest_status")
    elif [ -n "$listed" ]; then failures+=("GPU suites: none built although a GPU is listed")
    fi
    suite_lines+=("(all): none ran (not built: no nvcc or no CUDA toolkit?)")
  fi
  while read -r number name result; do
    [ -n "$name" ] || continue
    output=$(grep -E "^$number: " "$log_dir/gpu-suites.log" | sed "s/^$number: //")
    reason=$(grep -E "skipped: " <<<"$output" | tail -1 | sed -E 's/.*skipped: //')
    summary=$(grep -E "summary: " <<<"$output" | tail -1 | sed -E 's/.*summary: //')
    ordered=$(sed -nE 's/.*ordered runs ([0-9]+).*/\1/p' <<<"$summary")
    controls=$(sed -nE 's/.*control runs ([0-9]+).*/\1/p' <<<"$summary")
    raced=$(sed -nE 's/.*controls that observed a race ([0-9]+).*/\1/p' <<<"$summary")
    counts=""
    [ -n "$summary" ] && counts=" (ordered runs $ordered, control runs $controls, controls that observed a race $raced)"
    case "$result" in
      Passed)
        if [[ "$name" == gpu_ordering_* ]] && { [ -z "$summary" ] || [ "${controls:-0}" -eq 0 ] || [ "$raced" != "$controls" ]; }; then
          line="$name: FAILED: passed without every control observing its race$counts"
          failures+=("$name")
        else
          line="$name: passed$counts"
        fi ;;
      Skipped)
        suite_vendor=nvidia
        [[ "$name" == hip* || "$name" == *_hip* ]] && suite_vendor=amd
        if [[ " $listed_vendors " == *" $suite_vendor "* ]]; then
          line="$name: FAILED: skipped although a GPU is listed: ${reason:-no reason printed}"
          failures+=("$name")
        else
          line="$name: skipped: ${reason:-no reason printed}"
        fi ;;
      *)
        line="$name: FAILED ($result)$counts"
        failures+=("$name") ;;
    esac
    suite_lines+=("$line")
  done <<<"$results"
fi

if step others && [[ " ${failures[*]-} " != *" build "* ]]; then
  echo "== other suites on the CUDA build"
  within ctest --test-dir "$build" -LE gpu -j"$(nproc)" >"$log_dir/other-suites.log" 2>&1 ||
    failures+=("other suites")
  grep -E "tests passed|\(Failed\)|\(Timeout\)|\*\*\*Failed" "$log_dir/other-suites.log"
fi

if step bench && [[ " ${failures[*]-} " != *" build "* ]]; then
  echo "== benchmarks"
  if [ -x "$build/bench/bench_gpu" ]; then
    bench=$(within "$build/bench/bench_gpu")
    bench_status=$?
    echo "$bench"
    [ $bench_status -eq 0 ] || failures+=("bench_gpu")
    if [[ "$listed_vendors" == *nvidia* ]] && grep -q '^skipped' <<<"$bench"; then
      failures+=("bench_gpu skipped although a GPU is listed")
    fi
  fi
  if [ -x "$build/bench/bench_host" ]; then
    within "$build/bench/bench_host" | grep -E "export|pooled|fresh"
    [ "${PIPESTATUS[0]}" -eq 0 ] || failures+=("bench_host")
  fi
fi

echo "== report"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), elapsed: ${SECONDS}s of ${limit}s"
echo "GPUs listed: $([ -n "$listed" ] && grep -c . <<<"$listed" || echo none)"
for line in "${suite_lines[@]}"; do echo "suite $line"; done
[ $deadline_hit -eq 1 ] && failures+=("deadline of ${limit}s")
if [ ${#failures[@]} -gt 0 ]; then
  echo "gpu-check: FAILED: ${failures[*]}"
  exit 1
fi
if [ $suites_ran -eq 1 ] && [ -z "$listed" ] && printf '%s\n' "${suite_lines[@]}" | grep -qv ': passed'; then
  echo "gpu-check: SKIPPED: no GPU is listed here; nothing above ran on a device"
  exit 0
fi
echo "gpu-check: PASSED"
