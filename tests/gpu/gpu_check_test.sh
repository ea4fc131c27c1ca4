#!/usr/bin/env bash
# scripts/gpu-check.sh's verdicts, without a GPU: fake nvidia-smi / rocm-smi first on PATH
# and a fake build tree whose ctest "GPU suites" skip, pass or hang on demand.
# Usage: gpu_check_test.sh SOURCE_DIR CTEST_DIR
set -uo pipefail
source_dir=$1
export PATH="$2:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

mkdir -p "$work/bin" "$work/build"
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
# The suites as the real ones report: a skip with the runtime's reason (exit 77), a pass
# with its summary line, or a hang.
cat >"$work/suite.sh" <<'EOF'
#!/bin/sh
touch "$FAKE_WORK/ran-$1"
case "$FAKE_SUITES" in
  skip) echo "$1: skipped: no CUDA device: [cudaGetDeviceCount][cudaErrorInsufficientDriver] CUDA driver version is insufficient for CUDA runtime version"; exit 77 ;;
  pass) echo "$1: summary: ordered runs 120, control runs 40, controls that observed a race 40" ;;
  unraced) echo "$1: summary: ordered runs 120, control runs 40, controls that observed a race 39" ;;
  hang) sleep 120 ;;
esac
EOF
chmod +x "$work/bin/nvidia-smi" "$work/bin/rocm-smi" "$work/suite.sh"
for suite in gpu_ordering_legacy gpu_ordering_per_thread hip_device; do
  echo "add_test($suite \"$work/suite.sh\" \"$suite\")"
  echo "set_tests_properties($suite PROPERTIES LABELS \"gpu\" SKIP_RETURN_CODE 77)"
done >"$work/build/CTestTestfile.cmake"

# check NAME GPUS SUITES DEADLINE EXPECTED_STATUS PATTERN...: every PATTERN must be printed.
check() {
  local name=$1 gpus=$2 suites=$3 deadline=$4 expected=$5
  shift 5
  rm -f "$work"/ran-*
  local output status
  output=$(FAKE_GPUS=$gpus FAKE_SUITES=$suites FAKE_WORK=$work PATH="$work/bin:$PATH" \
    DL_SYNC_GPU_CHECK_DEADLINE=$deadline DL_SYNC_GPU_CHECK_BUILD="$work/build" \
    DL_SYNC_GPU_CHECK_STEPS=suites bash "$source_dir/scripts/gpu-check.sh" 2>&1)
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
check "no time left: nothing runs, and it fails" nvidia pass 0 1 "deadline: 0s reached, not running" \
  "gpu-check: FAILED"
[ -e "$work/ran-gpu_ordering_legacy" ] && { echo "deadline 0: a suite ran"; failures=$((failures + 1)); }
check "a hanging suite is stopped at the deadline" nvidia hang 8 1 "deadline: 8s reached while running" \
  "gpu-check: FAILED"
# Every small deadline, whatever the script keeps for its report: a step either does not
# start or is stopped; none runs without a limit (timeout 0) or fails to start (negative).
for seconds in 1 2 3 4 5 6; do
  check "deadline ${seconds}s with a hanging suite" nvidia hang "$seconds" 1 \
    "deadline: ${seconds}s reached( while running|, not running)" "gpu-check: FAILED"
done

[ $failures -eq 0 ] && echo "all gpu-check verdicts as expected"
exit $((failures > 0))
