#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu-check.sh's verdicts, without a GPU: fake nvidia-smi / rocm-smi first on PATH,
# a fake build tree whose ctest "GPU suites" skip, pass or hang on demand, with a line per
# mode as the ordering suites print them, a fake Python whose GPU suite passes, skips or
# fails on demand (as python/tests/gpu/run_gpu_suite.py reports) and whose ordering audit
# (python -m dlsync.audit) passes, fails its control or reference, or runs nothing, and the
# results file.
# Usage: gpu_check_test.sh SOURCE_DIR CTEST_DIR
set -uo pipefail
source_dir=$1
export PATH="$2:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

mkdir -p "$work/bin" "$work/build" "$work/site"
# nvidia-smi -L lists one line per GPU, "GPU <index>: <name> (UUID: GPU-<uuid>)" (nvidia-smi(1),
# --list-gpus). Without a working driver it prints why on stdout and exits 9 (nvidia-smi(1),
# RETURN VALUE: "9 NVIDIA Driver is not loaded").
cat >"$work/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$FAKE_GPUS" in
  nvidia)
    case "$1" in
      -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-1111-2222-3333-444444444444)" ;;
      *) echo "NVIDIA H200, 570.00, 143771 MiB" ;;
    esac ;;
  *) echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9 ;;
esac
EOF
# rocm-smi --showid prints "GPU[<index>]<tabs>: Device ID: 0x...." per GPU between banner
# lines; with no GPU it prints the banners only.
cat >"$work/bin/rocm-smi" <<'EOF'
#!/bin/sh
echo "======================= ROCm System Management Interface ======================="
[ "$FAKE_GPUS" = amd ] && printf 'GPU[0]\t\t: Device ID: 0x74a1\n'
echo "============================= End of ROCm SMI Log =============================="
EOF
# The suites as the real ones report (tests/gpu/test_gpu_ordering.c): a skip with the
# runtime's reason (exit 77), a pass with a line per mode and the summary, or a hang.
cat >"$work/suite.sh" <<'EOF'
#!/bin/sh
touch "$FAKE_WORK/ran-$1"
name=$1
modes() { # every mode's line; $1: a mode left out, $2: a mode whose controls raced 1 of 2,
          # $3: a mode skipped with its reason
  case "$name" in
    gpu_contexts) all="created-contexts default-stream-other-context reset capture-cold-context
                       capture-survives-synchronize capture-survives-release-poll
                       release-legacy-other-context green-context" ;;
    gpu_release) all="release-reuse-stream release-deferred release-capture" ;;
    *) all="stream-argument n0 n1 legacy-stream per-thread-stream stream-0 capture-global
            capture-thread-local capture-relaxed external-wait threads" ;;
  esac
  for mode in $all; do
    [ "$mode" = "$1" ] && continue
    if [ "$mode" = "${3:-}" ]; then
      echo "$name: mode $mode: skipped: the CUDA driver has no green contexts (cuGreenCtxCreate came with CUDA 12.4)"
      continue
    fi
    raced=2
    [ "$mode" = "$2" ] && raced=1
    echo "$name: mode $mode: ordered runs 53, control runs 2, controls that observed a race $raced"
  done
  case "$name" in gpu_ordering_*)
    echo "$name: mode two-devices: skipped: one CUDA device (the two-device scenario needs two)" ;;
  esac
}
summary() { echo "$name: summary: ordered runs 120, control runs 40, controls that observed a race $1"; }
case "$FAKE_SUITES" in
  skip) echo "$1: skipped: no CUDA device: [cudaGetDeviceCount][cudaErrorInsufficientDriver] CUDA driver version is insufficient for CUDA runtime version"; exit 77 ;;
  pass) echo "device 0: NVIDIA H200, sm_90, CUDA runtime 13.0, driver supports 13.0"
        modes "" ""; summary 40 ;;
  unraced) modes "" ""; summary 39 ;;
  mode-unraced) modes "" "${FAKE_MODE:-capture-relaxed}"; summary 40 ;;
  mode-missing) modes "${FAKE_MODE:-threads}" ""; summary 40 ;;
  mode-skipped) modes "" "" "$FAKE_MODE"; summary 40 ;;
  hang) sleep 120 ;;
esac
EOF
# The Python GPU suite: run_gpu_suite.py's lines and exit status, and its tables; and the
# ordering audit: dlsync.audit's summary lines (python/dlsync/audit/_report.py), its files
# and exit status.
cat >"$work/bin/fake-python" <<'EOF'
#!/bin/sh
if [ "$1" = "-m" ]; then
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) json=$2; shift ;;
      --markdown) markdown=$2; shift ;;
    esac
    shift
  done
  echo "| producer -> consumer | device | stream=None | stream=-1 |" >"$markdown"
  echo '{"tool": "dlsync.audit"}' >"$json"
  case "$FAKE_AUDIT" in
    nothing)
      echo "dlsync.audit: device: cuda; gate: none used (no pair held a CUDA stream); on a GPU: cuStreamWaitValue32 on host-mapped memory"
      echo "dlsync.audit: frameworks: torch: no GPU: torch.cuda.is_available() is False"
      echo "dlsync.audit: exit 3: no pair could run here (each says why)"
      exit 3 ;;
  esac
  raced=8 ordered=8
  [ "$FAKE_AUDIT" = unraced ] && raced=7
  [ "$FAKE_AUDIT" = unordered ] && ordered=7
  echo "dlsync.audit: device: cuda; gate: cuStreamWaitValue32 (CU_STREAM_WAIT_VALUE_GEQ) on host-mapped memory (cuMemHostAlloc DEVICEMAP|PORTABLE), device 0"
  echo "dlsync.audit: frameworks: torch: torch 2.11.0 (CUDA 13.0), cupy: cupy 14.0.0"
  echo "dlsync.audit: summary: pairs 10 of 10, cells 80: ordered 40, ordered (host blocked) 2, RACE 20, error 4, not available 14, not run 0 (RACE as stream=-1 asks: 10)"
  echo "dlsync.audit: controls: stream cells 8, RACE $raced"
  echo "dlsync.audit: reference: stream cells 8, ordered $ordered"
  echo "dlsync.audit: exit 0: 8 RACE cell(s): torch -> cupy None (allowed by --allow-race)"
  exit 0
fi
echo "python_gpu: python: 3.12.3 (fake)"
echo "python_gpu: frameworks: torch 2.11.0 (CUDA 13.0), cupy 14.0.0, jax 0.11.0, cuda.core 0.5.0"
mkdir -p "$3"
echo "| dlsync -> torch | cuda | ordered |" >"$3/audit-controls.md"
echo "| exchange | us per exchange |" >"$3/python-cost.md"
test=test_gpu_exchange.ExchangeThroughDlsync
case "$FAKE_PYTHON" in
  pass|no-gpu-skip|unraced)
    echo "python_gpu: test $test.test_torch_to_cupy: passed"
    echo "python_gpu: test $test.test_cuda_core_to_jax: skipped: not installed: cuda.core (ModuleNotFoundError)"
    [ "$FAKE_PYTHON" = no-gpu-skip ] &&
      echo "python_gpu: test $test.test_torch_to_jax: skipped: no GPU: jax.devices('cuda'): no CUDA backend"
    raced=30
    [ "$FAKE_PYTHON" = unraced ] && raced=29
    echo "python_gpu: summary: ordered runs 400, control runs 30, controls that observed a race $raced, host blocked in 0 ordered runs; tests passed 1, skipped 1, failed 0" ;;
  all-skipped)
    echo "python_gpu: test $test.test_torch_to_cupy: skipped: no GPU: torch.cuda.is_available() is False"
    echo "python_gpu: skipped: no GPU: torch.cuda.is_available() is False"
    exit 77 ;;
  fail)
    echo "python_gpu: test test_gpu_threads.ThreadsExportAtOnce.test_threads_export_at_once: FAILED: thread 1 of 4, gated run 0, control without dlsync.export: expected the race every time"
    echo "python_gpu: summary: ordered runs 10, control runs 1, controls that observed a race 0, host blocked in 0 ordered runs; tests passed 0, skipped 0, failed 1"
    exit 1 ;;
esac
EOF
chmod +x "$work/bin/nvidia-smi" "$work/bin/rocm-smi" "$work/suite.sh" "$work/bin/fake-python"
for suite in gpu_ordering_legacy gpu_ordering_per_thread gpu_contexts gpu_release hip_device; do
  echo "add_test($suite \"$work/suite.sh\" \"$suite\")"
  echo "set_tests_properties($suite PROPERTIES LABELS \"gpu\" SKIP_RETURN_CODE 77)"
done >"$work/build/CTestTestfile.cmake"

# check NAME GPUS SUITES DEADLINE EXPECTED_STATUS PATTERN...: every PATTERN must be printed.
# STEPS (default: suites), FAKE_PYTHON (pass), FAKE_AUDIT (pass), PYTHON (the fake) and
# RESULTS (none) may be set for one call.
check() {
  local name=$1 gpus=$2 suites=$3 deadline=$4 expected=$5
  shift 5
  rm -f "$work"/ran-*
  local status
  output=$(FAKE_GPUS=$gpus FAKE_SUITES=$suites FAKE_WORK=$work PATH="$work/bin:$PATH" \
    FAKE_PYTHON=${FAKE_PYTHON:-pass} FAKE_AUDIT=${FAKE_AUDIT:-pass} \
    DL_SYNC_GPU_CHECK_PYTHON="${PYTHON:-$work/bin/fake-python}" \
    DL_SYNC_GPU_CHECK_PYTHONPATH="$work/site" DL_SYNC_GPU_CHECK_RESULTS=${RESULTS:-} \
    DL_SYNC_GPU_CHECK_DEADLINE=$deadline DL_SYNC_GPU_CHECK_BUILD="$work/build" \
    DL_SYNC_GPU_CHECK_STEPS=${STEPS:-suites} bash "$source_dir/scripts/gpu-check.sh" 2>&1)
  status=$?
  local ok=1
  [ "$status" -eq "$expected" ] || { echo "$name: exit $status, expected $expected"; ok=0; }
  for pattern in "$@"; do
    grep -qE -- "$pattern" <<<"$output" || { echo "$name: no line matches: $pattern"; ok=0; }
  done
  if [ $ok -eq 1 ]; then echo "ok: $name"; else
    failures=$((failures + 1))
    echo "---- output of $name:"; echo "$output"; echo "----"
  fi
}

reason='no CUDA device: \[cudaGetDeviceCount\]\[cudaErrorInsufficientDriver\]'
check "no GPU listed: skipped suites are skipped" none skip 330 0 \
  "suite gpu_ordering_legacy: skipped: $reason" "gpu-check: SKIPPED"
check "NVIDIA GPU listed: a skipped suite fails, with the runtime's reason" nvidia skip 330 1 \
  "suite gpu_ordering_legacy: FAILED: skipped although a GPU is listed: $reason" \
  "suite gpu_ordering_per_thread: FAILED" "suite hip_device: skipped" "gpu-check: FAILED"
check "AMD GPU listed: a skipped HIP suite fails" amd skip 330 1 \
  "suite hip_device: FAILED: skipped although a GPU is listed" "suite gpu_ordering_legacy: skipped" \
  "gpu-check: FAILED"
check "suites pass: counts per suite" nvidia pass 330 0 \
  "suite gpu_ordering_legacy: passed \(ordered runs 120, control runs 40, controls that observed a race 40\)" \
  "gpu-check: PASSED"
check "a control that saw no race fails the check" nvidia unraced 330 1 \
  "suite gpu_ordering_legacy: FAILED: passed without every control observing its race" "gpu-check: FAILED"
check "suites pass: a line per mode, with its counts" nvidia pass 330 0 \
  "suite gpu_ordering_legacy / capture-global: passed \(ordered runs 53, control runs 2, controls that observed a race 2\)" \
  "suite gpu_ordering_per_thread / threads: passed" \
  "suite gpu_ordering_legacy / two-devices: skipped: one CUDA device" "gpu-check: PASSED"
check "a mode whose controls did not all observe the race fails, by name" nvidia mode-unraced 330 1 \
  "suite gpu_ordering_legacy: FAILED: modes: capture-relaxed" \
  "suite gpu_ordering_legacy / capture-relaxed: FAILED: not every control observed its race" \
  "gpu-check: FAILED"
check "a mode without its line fails, by name" nvidia mode-missing 330 1 \
  "suite gpu_ordering_legacy / threads: FAILED: the suite printed no line for this mode" \
  "gpu-check: FAILED"
check "the contexts and release suites: a line per mode, with its counts" nvidia pass 330 0 \
  "suite gpu_contexts / reset: passed \(ordered runs 53, control runs 2, controls that observed a race 2\)" \
  "suite gpu_contexts / capture-survives-synchronize: passed" \
  "suite gpu_contexts / capture-survives-release-poll: passed" \
  "suite gpu_contexts / release-legacy-other-context: passed" \
  "suite gpu_contexts / green-context: passed" \
  "suite gpu_release / release-reuse-stream: passed" "suite gpu_release / release-deferred: passed" \
  "suite gpu_release / release-capture: passed" "gpu-check: PASSED"
FAKE_MODE=release-deferred check "a release control that saw no race fails, by name" nvidia mode-unraced 330 1 \
  "suite gpu_release: FAILED: modes: release-deferred" \
  "suite gpu_release / release-deferred: FAILED: not every control observed its race" \
  "suite gpu_ordering_legacy: passed" "gpu-check: FAILED"
FAKE_MODE=created-contexts check "a contexts mode without its line fails, by name" nvidia mode-missing 330 1 \
  "suite gpu_contexts / created-contexts: FAILED: the suite printed no line for this mode" \
  "suite gpu_release: passed" "gpu-check: FAILED"
FAKE_MODE=green-context check "the green-context mode without its line fails" nvidia mode-missing 330 1 \
  "suite gpu_contexts / green-context: FAILED: the suite printed no line for this mode" \
  "gpu-check: FAILED"
FAKE_MODE=green-context check "the green-context mode skipped with its reason passes" nvidia mode-skipped 330 0 \
  "suite gpu_contexts / green-context: skipped: the CUDA driver has no green contexts" \
  "gpu-check: PASSED"
check "no time left: nothing runs, and it fails" nvidia pass 0 1 "deadline: 0s reached, not running" \
  "gpu-check: FAILED"
[ -e "$work/ran-gpu_ordering_legacy" ] && { echo "deadline 0: a suite ran"; failures=$((failures + 1)); }
# The suites must have started: the script keeps 4 s for its report, and its steps before
# them take seconds of their own on a loaded machine (bash's SECONDS counts whole seconds,
# so even 1 s of work can read as 2): 12 s leave the suites at least 6 s to start in.
check "a hanging suite is stopped at the deadline" nvidia hang 12 1 "deadline: 12s reached while running" \
  "gpu-check: FAILED"
# Every small deadline, whatever the script keeps for its report: a step either does not
# start or is stopped; none runs without a limit (timeout 0) or fails to start (negative).
for seconds in 1 2 3 4 5 6; do
  check "deadline ${seconds}s with a hanging suite" nvidia hang "$seconds" 1 \
    "deadline: ${seconds}s reached( while running|, not running)" "gpu-check: FAILED"
done

# The Python GPU suite's verdicts.
STEPS="suites python" check "Python suite passes; a missing framework is reported" nvidia pass 330 0 \
  "suite python_gpu: passed \(ordered runs 400, control runs 30, controls that observed a race 30.*; skipped: not installed: cuda.core" \
  "gpu-check: PASSED"
STEPS="suites python" FAKE_PYTHON=no-gpu-skip check "a Python test skipped for want of a GPU, one listed: fails" \
  nvidia pass 330 1 "suite python_gpu: FAILED: 1 tests skipped for want of a GPU" "gpu-check: FAILED"
STEPS="suites python" FAKE_PYTHON=all-skipped check "the Python suite all skipped, a GPU listed: fails" \
  nvidia pass 330 1 "suite python_gpu: FAILED: skipped although a GPU is listed: no GPU" "gpu-check: FAILED"
STEPS="suites python" FAKE_PYTHON=all-skipped check "the Python suite all skipped, no GPU: skipped" \
  none skip 330 0 "suite python_gpu: skipped: no GPU: torch" "gpu-check: SKIPPED"
STEPS="suites python" FAKE_PYTHON=unraced check "a Python control that saw no race fails the check" \
  nvidia pass 330 1 "suite python_gpu: FAILED: passed without every control observing its race" \
  "gpu-check: FAILED"
STEPS="suites python" FAKE_PYTHON=fail check "a failing Python test fails the check, by name" \
  nvidia pass 330 1 "suite python_gpu: FAILED \(exit 1\): test_gpu_threads.ThreadsExportAtOnce.test_threads_export_at_once" \
  "gpu-check: FAILED"

# The ordering audit's verdicts: its control must race and its reference be ordered in every
# stream cell; where a GPU is listed it must run something.
STEPS="suites audit" check "the audit passes with its control and reference counts" nvidia pass 330 0 \
  "suite dlsync_audit: passed \(pairs 10 of 10, cells 80: .*the control's RACE in 8 of 8 stream cells, the reference ordered in 8 of 8\)" \
  "gpu-check: PASSED"
STEPS="suites audit" FAKE_AUDIT=unraced check "an audit control that saw no race fails the check" \
  nvidia pass 330 1 "suite dlsync_audit: FAILED: the control did not show a RACE in every stream cell \(RACE 7 of 8" \
  "gpu-check: FAILED"
STEPS="suites audit" FAKE_AUDIT=unordered check "an audit reference not ordered fails the check" \
  nvidia pass 330 1 "suite dlsync_audit: FAILED: dlsync's reference was not ordered in every stream cell \(ordered 7 of 8" \
  "gpu-check: FAILED"
STEPS="suites audit" FAKE_AUDIT=nothing check "an audit that ran no pair, a GPU listed: fails" \
  nvidia pass 330 1 "suite dlsync_audit: FAILED: no pair could run although a GPU is listed: torch: no GPU" \
  "gpu-check: FAILED"
STEPS="suites audit" FAKE_AUDIT=nothing check "an audit that ran no pair, no GPU: skipped" \
  none skip 330 0 "suite dlsync_audit: skipped: no pair could run here" "gpu-check: SKIPPED"

# The real Python suite runner with a python3 that lacks numpy (a shim first on PATH: the
# machine's interpreter, numpy's import refused as where it is not installed): skipped with
# the reason where no GPU is listed, as the C suites are; a failure naming numpy where one is.
real_python=$(command -v python3 || true)
if [ -n "$real_python" ]; then
  mkdir -p "$work/no-numpy/numpy" "$work/no-numpy-bin"
  echo "raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')" >"$work/no-numpy/numpy/__init__.py"
  printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' \
    "$work/no-numpy" "$real_python" >"$work/no-numpy-bin/python3"
  chmod +x "$work/no-numpy-bin/python3"
  PATH="$work/no-numpy-bin:$PATH" STEPS="suites python" PYTHON=python3 \
    check "no numpy, no GPU: the Python suite is skipped with the reason" none skip 330 0 \
    "suite python_gpu: skipped: not installed: numpy \(ModuleNotFoundError" "gpu-check: SKIPPED"
  PATH="$work/no-numpy-bin:$PATH" STEPS="suites python" PYTHON=python3 \
    check "no numpy, a GPU listed: the Python suite fails, naming numpy" nvidia pass 330 1 \
    "suite python_gpu: FAILED: .*not installed: numpy" "gpu-check: FAILED"
else
  echo "not checked: the Python suite without numpy (no python3 here)"
fi

# The results file: written by the run, a line per suite and mode, "not run" for the rest.
results=$work/results.md
STEPS="suites python audit results" RESULTS=$results check "the results file is written" nvidia pass 330 0 \
  "results: written to $results" "gpu-check: PASSED"
for pattern in 'verdict: \*\*PASSED\*\*' 'device \(name, driver, memory\): NVIDIA H200, 570.00, 143771 MiB' \
               'as the suites saw it: device 0: NVIDIA H200, sm_90' 'frameworks: torch 2.11.0' \
               '^\| gpu_ordering_legacy \| passed \(ordered runs 120' '^\| gpu_ordering_legacy / threads \| passed' \
               '^\| python_gpu \| passed' '^\| bench_gpu \| not run \(step not requested\) \|' \
               '^\| other suites \| not run' '^\| producer -> consumer \| device \| stream=None \| stream=-1 \|' \
               "^## dlsync.audit: the frameworks' ordering" '^- device: cuda; gate: cuStreamWaitValue32' \
               '^\| dlsync_audit \| passed' '^\| dlsync -> torch \| cuda \| ordered \|' \
               '^\| exchange \| us per exchange \|' 'test_torch_to_cupy \| passed \|'; do
  grep -qE -- "$pattern" "$results" 2>/dev/null ||
    { echo "results file: no line matches: $pattern"; failures=$((failures + 1)); }
done
grep -A2 '^## bench_gpu' "$results" | grep -qx 'not run' ||
  { echo "results file: bench_gpu's figures are not 'not run'"; failures=$((failures + 1)); }
STEPS="suites python results" FAKE_PYTHON=fail RESULTS=$results check "a failed run writes its results too" \
  nvidia pass 330 1 "results: written to $results"
grep -qE '^- verdict: \*\*FAILED: python_gpu\*\*' "$results" ||
  { echo "results file of a failed run: no FAILED verdict"; failures=$((failures + 1)); }
# Where no GPU is listed, nothing is written unless a file is named.
STEPS="suites results" check "no GPU listed: no results file" none skip 330 0 "gpu-check: SKIPPED"
grep -q "results: written" <<<"$output" && { echo "no GPU: a results file was written"; failures=$((failures + 1)); }

[ $failures -eq 0 ] && echo "all gpu-check verdicts as expected"
exit $((failures > 0))
