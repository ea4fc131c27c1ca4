#!/usr/bin/env bash
# One command for a fresh GPU machine: builds dlsync with CUDA, runs the GPU ordering
# suites (ctest -L gpu) and the benchmarks, and prints a short report. It stops itself
# after 7.5 minutes; on one H200 it takes about 2 (most of it the build).
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + 450))
left() { echo $((deadline - SECONDS)); }
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
export PATH="$cuda_root/bin:$PATH"
report=()

if [ "$(id -u)" -eq 0 ] && ! dpkg -s libcmocka-dev cmake >/dev/null 2>&1; then
  timeout 180 bash scripts/install-deps.sh build-essential cmake pkg-config libcmocka-dev || true
fi
echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
echo "== build (CUDA, Release)"
mkdir -p build
timeout "$(left)" cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release \
  -DDL_SYNC_BUILD_BENCH=ON -DCUDAToolkit_ROOT="$cuda_root" \
  -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" >build/gpu.configure.log 2>&1 &&
  timeout "$(left)" cmake --build build/gpu -j"$(nproc)" >build/gpu.build.log 2>&1
build_status=$?
[ $build_status -eq 0 ] || { tail -30 build/gpu.configure.log build/gpu.build.log; echo "build failed"; exit 1; }

echo "== GPU suites (ctest -L gpu)"
timeout "$(left)" ctest --test-dir build/gpu -L gpu --output-on-failure -V 2>&1 | tee build/gpu.ctest.log |
  grep -E "wrong values|events created|dependencies|skipped|OK \]|FAILED|PASSED|tests passed|Test +#"
gpu_status=${PIPESTATUS[0]}
echo "== all suites on the CUDA build"
timeout "$(left)" ctest --test-dir build/gpu -LE gpu -j"$(nproc)" 2>&1 | grep -E "tests passed|Failed|Skipped"
all_status=${PIPESTATUS[0]}

echo "== benchmarks"
timeout "$(left)" build/gpu/bench/bench_gpu
timeout "$(left)" build/gpu/bench/bench_host | grep -E "export|pooled|fresh"

echo "== report"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), elapsed: ${SECONDS}s"
skipped=$(grep -c '\*\*\*Skipped' build/gpu.ctest.log || true)
if [ $gpu_status -ne 0 ]; then echo "GPU suites: FAILED ($gpu_status)"
elif [ "$skipped" -gt 0 ]; then echo "GPU suites: $skipped SKIPPED (no device answered), none failed"
else echo "GPU suites: passed"; fi
echo "other suites: $([ $all_status -eq 0 ] && echo passed || echo "FAILED ($all_status)")"
[ $gpu_status -eq 0 ] && [ $all_status -eq 0 ]
