#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One command for a GPU machine: builds dlsync with CUDA, runs the GPU suites (ctest -L gpu)
# with a line per suite and per mode, the GPU benchmark, the Python GPU suite with the
# machine's python3 (PyTorch, CuPy, JAX, cuda.core), the ordering audit of those frameworks
# (python -m dlsync.audit), the other suites on that build, and ends with a verdict. It never runs past a hard deadline (330 s, build included). Where a
# GPU is listed it writes docs/gpu-results.md. Works offline: cmocka (and pkg-config) come
# from packages carried in .gpu-deps/ (scripts/fetch-gpu-deps.sh) when they are missing.
#
# Verdicts: PASSED; FAILED (exit 1); SKIPPED (exit 0) only when neither `nvidia-smi -L`
# nor `rocm-smi` lists a GPU. Where one does, a suite that skips is a failure, printed with
# the runtime's reason (a driver too old for the toolkit, for instance), and so is a
# Python test that skips for want of a GPU or of the gate kernels.
#
# Environment (defaults in brackets):
#   DL_SYNC_GPU_CHECK_DEADLINE  seconds for the whole script [330]
#   DL_SYNC_GPU_CHECK_BUILD     build directory [build/gpu]
#   DL_SYNC_GPU_CHECK_STEPS     steps to run [deps build suites bench python audit others
#                               results];
#                               also: synccheck (the gated suites under compute-sanitizer)
#   DL_SYNC_GPU_CHECK_RESULTS   the results file [docs/gpu-results.md, written only where a
#                               GPU is listed; when set, written whatever is listed]
#   DL_SYNC_GPU_CHECK_PYTHON    the interpreter of the Python suite [python3]
#   DL_SYNC_GPU_CHECK_PYTHONPATH  where the module dlsync is installed already [none: it
#                               is installed into the build folder]
#   DL_SYNC_GPU_DEPS            carried packages [.gpu-deps]
#   DL_SYNC_GPU_CHECK_CARRIED   auto (when cmocka is not found), always, never [auto]
#   DL_SYNC_GPU_CHECK_NO_APT    set: never install missing packages with apt (as root it
#                               does where nothing is carried)
#   CUDAToolkit_ROOT            [/usr/local/cuda]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${DL_SYNC_GPU_CHECK_DEADLINE:-330}
deadline=$((SECONDS + limit))
report_reserve=4 # seconds kept for the report; timeout's --kill-after comes out of it too
build=${DL_SYNC_GPU_CHECK_BUILD:-build/gpu}
build_abs=$(realpath -m "$build")
steps=" ${DL_SYNC_GPU_CHECK_STEPS:-deps build suites bench python audit others results} "
deps_dir=$(realpath -m "${DL_SYNC_GPU_DEPS:-.gpu-deps}")
carried=${DL_SYNC_GPU_CHECK_CARRIED:-auto}
python=${DL_SYNC_GPU_CHECK_PYTHON:-python3}
results_file=${DL_SYNC_GPU_CHECK_RESULTS:-}
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
failed() { [[ " ${failures[*]-} " == *" $1 "* ]]; }
log_dir=$build
mkdir -p "$log_dir"

# The lines of the report and of the results file: "name<TAB>result".
suite_lines=()
suite() { suite_lines+=("$1"$'\t'"$2"); }

echo "== GPUs listed"
# nvidia-smi -L prints "GPU <index>: <name> (UUID: ...)" per GPU; rocm-smi --showid prints
# "GPU[<index>]<tab>: Device ID: ..." per GPU. Anything else (no driver, no device) lists none.
listed="" listed_vendors="" gpu_query=""
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
  if [[ "$listed_vendors" == *nvidia* ]]; then
    gpu_query=$(within nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)
    echo "$gpu_query"
  fi
else
  echo "none (no nvidia-smi or rocm-smi, or they list no GPU): suites that skip are reported as skipped"
fi
[ -n "$listed" ] && [ -z "$results_file" ] && results_file=docs/gpu-results.md

# Carried packages: unpacked (dpkg-deb -x, or ar and tar without dpkg) into a prefix under
# the build folder, never into /; pkg-config and the loader pointed at it.
deb_arch() { # the machine's Debian architecture name
  case "$(uname -m)" in x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) uname -m ;; esac
}
# DL_SYNC_GPU_CHECK_NO_DPKG=1: as on a machine without dpkg (for the tests of that path).
have_dpkg() { [ -z "${DL_SYNC_GPU_CHECK_NO_DPKG:-}" ] && command -v dpkg-deb >/dev/null 2>&1; }
unpack_deb() { # deb, prefix
  if have_dpkg; then
    dpkg-deb -x "$1" "$2"
  else
    local scratch member
    scratch=$(mktemp -d)
    member=$(cd "$scratch" && ar t "$1" | grep '^data\.tar' | head -n 1)
    (cd "$scratch" && ar x "$1" "$member") && tar -xf "$scratch/$member" -C "$2"
    local status=$?
    rm -rf "$scratch"
    return $status
  fi
}
deb_field() { # deb, field: from the package's control data
  if have_dpkg; then dpkg-deb -f "$1" "$2"; else
    local scratch member
    scratch=$(mktemp -d)
    member=$(cd "$scratch" && ar t "$1" | grep '^control\.tar' | head -n 1)
    (cd "$scratch" && ar x "$1" "$member" && tar -xf "$member" ./control 2>/dev/null || tar -xf "$member" control) &&
      sed -n "s/^$2: //p" "$scratch/control"
    rm -rf "$scratch"
  fi
}
use_carried() {
  local prefix=$build_abs/deps arch
  arch=$(deb_arch)
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "$deps_dir"/*.deb; do
    local package_arch
    package_arch=$(deb_field "$deb" Architecture)
    if [ -n "$package_arch" ] && [ "$package_arch" != all ] && [ "$package_arch" != "$arch" ]; then
      echo "carried: $(basename "$deb") is for $package_arch, this machine is $arch: not used"
      continue
    fi
    unpack_deb "$deb" "$prefix" || { echo "carried: could not unpack $deb"; return 1; }
    echo "carried: $(basename "$deb") unpacked into $prefix"
  done
  local pc_dirs="" lib_dirs="" dir
  for dir in "$prefix"/usr/lib/*/pkgconfig "$prefix"/usr/lib/pkgconfig "$prefix"/usr/share/pkgconfig; do
    [ -d "$dir" ] || continue
    pc_dirs="$pc_dirs${pc_dirs:+:}$dir"
    # The packages' .pc files name /usr (cmocka's: -I/usr/include -L/usr/lib/<arch>): the
    # files are under $prefix/usr now.
    sed -i -e "s|=/usr|=$prefix/usr|g" -e "s|-I/usr|-I$prefix/usr|g" -e "s|-L/usr|-L$prefix/usr|g" \
      "$dir"/*.pc 2>/dev/null
  done
  for dir in "$prefix"/usr/lib/*-linux-gnu "$prefix"/usr/lib; do
    [ -d "$dir" ] && lib_dirs="$lib_dirs${lib_dirs:+:}$dir"
  done
  export PKG_CONFIG_PATH="$pc_dirs${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$lib_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # pkgconf only where the machine has no pkg-config of its own.
  if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$prefix/usr/bin/pkgconf" ]; then
    mkdir -p "$prefix/bin"
    ln -sf "$prefix/usr/bin/pkgconf" "$prefix/bin/pkg-config"
    export PATH="$PATH:$prefix/bin"
  fi
  echo "carried: PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
  echo "carried: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists cmocka; then
    echo "carried: cmocka $(pkg-config --modversion cmocka): $(pkg-config --cflags --libs cmocka)"
  else
    echo "carried: cmocka is still not found through pkg-config"
    return 1
  fi
}
cmocka_found() { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists cmocka; }

if step deps; then
  if [ "$carried" = always ] || { [ "$carried" = auto ] && ! cmocka_found; }; then
    if compgen -G "$deps_dir/*.deb" >/dev/null; then
      echo "== carried packages ($deps_dir)"
      use_carried || failures+=("carried packages")
    elif [ "$carried" = always ]; then
      echo "== carried packages: none in $deps_dir"
      failures+=("carried packages")
    elif [ "$(id -u)" -eq 0 ] && [ -z "${DL_SYNC_GPU_CHECK_NO_APT:-}" ] && command -v apt-get >/dev/null 2>&1; then
      echo "== packages"
      within bash scripts/install-deps.sh build-essential cmake pkg-config libcmocka-dev ||
        failures+=("installing packages")
    else
      echo "== packages: cmocka not found, and no packages carried in $deps_dir: run" \
           "scripts/fetch-gpu-deps.sh on a machine with apt and copy its folder along (docs/gpu.md)"
      failures+=("cmocka")
    fi
  fi
fi

nvcc_version=""
python_install_pid=""
python_site=${DL_SYNC_GPU_CHECK_PYTHONPATH:-$build_abs/python-site}
python_install_log=$log_dir/python-install.log
start_python_install() { # in the background: the module builds while the C build does
  rm -f "$log_dir/python-install.status"
  (
    within bash scripts/install-python-module.sh "$python" "$python_site" "$deps_dir" \
      >"$python_install_log" 2>&1
    echo $? >"$log_dir/python-install.status"
  ) &
  python_install_pid=$!
}
# Waits for the install (started here if the build did not start it): its exit status in
# install_status. Not in a subshell: only this shell can wait for the job.
python_install_wait() {
  install_status=0
  [ -n "${DL_SYNC_GPU_CHECK_PYTHONPATH:-}" ] && return
  [ -n "$python_install_pid" ] || start_python_install
  wait "$python_install_pid" 2>/dev/null
  install_status=$(cat "$log_dir/python-install.status" 2>/dev/null || echo 1)
}
if step build; then
  echo "== build (Release) in $build"
  { step python || step audit; } && [ -z "${DL_SYNC_GPU_CHECK_PYTHONPATH:-}" ] && start_python_install
  configure=(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDL_SYNC_BUILD_BENCH=ON
             -DDL_SYNC_BUILD_PYTHON=OFF)
  if [ -x "$cuda_root/bin/nvcc" ]; then
    nvcc_version=$("$cuda_root/bin/nvcc" --version | grep -E '^Cuda compilation tools')
    echo "nvcc: $nvcc_version"
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

# The modes each gated suite reports (tests/gpu/test_gpu_*.c): each needs its line, and
# every control of it must have observed its race. two-devices may be skipped.
required_modes_of() {
  case "$1" in
    gpu_ordering_*) echo "stream-argument n0 n1 legacy-stream per-thread-stream stream-0
      capture-global capture-thread-local capture-relaxed external-wait threads" ;;
    gpu_contexts) echo "created-contexts default-stream-other-context reset capture-cold-context
      capture-survives-synchronize capture-survives-release-poll release-legacy-other-context
      green-context" ;;
    gpu_release) echo "release-reuse-stream release-deferred release-capture" ;;
  esac
}
optional_modes="two-devices"
gated_suite() { [[ "$1" == gpu_ordering_* || "$1" == gpu_contexts || "$1" == gpu_release ]]; }
counts_of() { # "ordered runs N, control runs M, controls that observed a race K" -> N M K
  sed -nE 's/.*ordered runs ([0-9]+), control runs ([0-9]+), controls that observed a race ([0-9]+).*/\1 \2 \3/p' <<<"$1"
}
device_line=""
suites_ran=0
if step suites && ! failed build; then
  echo "== GPU suites (ctest -L gpu)"
  within ctest --test-dir "$build" -L gpu -V >"$log_dir/gpu-suites.log" 2>&1
  ctest_status=$?
  suites_ran=1
  grep -E "^[0-9]+: (.*: summary:|.*(expected the race|expected the hazard|timed out|ran before|wrong values|another thread|events created|events made|after its reset|deleter|device [0-9]:))" \
    "$log_dir/gpu-suites.log" | sed 's/^[0-9]*: /  /' | awk '!seen[$0]++' | head -80
  device_line=$(sed -nE 's/^[0-9]+: (device 0: .*)/\1/p' "$log_dir/gpu-suites.log" | head -n 1)
  # One line per suite from ctest's result lines ("1/4 Test  #9: name .....   Passed  0.1 sec").
  results=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#([0-9]+): ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+( Run)?).*/\1 \2 \4/p' \
    "$log_dir/gpu-suites.log")
  if [ $ctest_status -eq 124 ] || [ $ctest_status -eq 137 ]; then
    deadline_hit=1
    suite "(GPU suites)" "stopped at the deadline; results so far are above and in $log_dir/gpu-suites.log"
  elif [ -z "$results" ]; then
    if [ $ctest_status -ne 0 ]; then failures+=("GPU suites: ctest exited $ctest_status")
    elif [ -n "$listed" ]; then failures+=("GPU suites: none built although a GPU is listed")
    fi
    suite "(GPU suites)" "none ran (not built: no nvcc or no CUDA toolkit?)"
  fi
  while read -r number name result; do
    [ -n "$name" ] || continue
    output=$(grep -E "^$number: " "$log_dir/gpu-suites.log" | sed "s/^$number: //")
    reason=$(grep -E "skipped: " <<<"$output" | tail -1 | sed -E 's/.*skipped: //')
    summary=$(grep -E "^[^ ]+: summary: " <<<"$output" | tail -1 | sed -E 's/.*summary: //')
    read -r ordered controls raced <<<"$(counts_of "$summary")"
    counts=""
    [ -n "$summary" ] && counts=" (ordered runs $ordered, control runs $controls, controls that observed a race $raced)"
    mode_lines=()
    mode_failures=""
    if gated_suite "$name" && [ "$result" = Passed ]; then
      for mode in $(required_modes_of "$name") $optional_modes; do
        line=$(grep -E "^[^ ]+: mode $mode: " <<<"$output" | tail -1 | sed -E "s/^[^ ]+: mode $mode: //")
        if [ -z "$line" ]; then
          [[ " $optional_modes " == *" $mode "* ]] && continue
          mode_lines+=("$mode"$'\t'"FAILED: the suite printed no line for this mode")
          mode_failures="$mode_failures $mode"
          continue
        fi
        if [[ "$line" == skipped:* ]]; then
          mode_lines+=("$mode"$'\t'"$line")
          continue
        fi
        read -r m_ordered m_controls m_raced <<<"$(counts_of "$line")"
        if [ -z "$m_controls" ] || [ "$m_controls" -eq 0 ] || [ "$m_raced" != "$m_controls" ]; then
          mode_lines+=("$mode"$'\t'"FAILED: not every control observed its race ($line)")
          mode_failures="$mode_failures $mode"
        else
          mode_lines+=("$mode"$'\t'"passed ($line)")
        fi
      done
    fi
    case "$result" in
      Passed)
        if gated_suite "$name" && { [ -z "$summary" ] || [ "${controls:-0}" -eq 0 ] || [ "$raced" != "$controls" ]; }; then
          line="FAILED: passed without every control observing its race$counts"
          failures+=("$name")
        elif [ -n "$mode_failures" ]; then
          line="FAILED: modes:$mode_failures$counts"
          failures+=("$name")
        else
          line="passed$counts"
        fi ;;
      Skipped)
        suite_vendor=nvidia
        [[ "$name" == hip* || "$name" == *_hip* ]] && suite_vendor=amd
        if [[ " $listed_vendors " == *" $suite_vendor "* ]]; then
          line="FAILED: skipped although a GPU is listed: ${reason:-no reason printed}"
          failures+=("$name")
        else
          line="skipped: ${reason:-no reason printed}"
        fi ;;
      *)
        line="FAILED ($result)$counts"
        failures+=("$name") ;;
    esac
    suite "$name" "$line"
    for mode_line in ${mode_lines[@]+"${mode_lines[@]}"}; do
      suite "$name / ${mode_line%%$'\t'*}" "${mode_line#*$'\t'}"
    done
  done <<<"$results"
elif ! step suites; then
  suite "(GPU suites)" "not run (step not requested)"
else
  suite "(GPU suites)" "not run (the build failed)"
fi

bench_output=""
if step bench && ! failed build; then
  echo "== benchmarks"
  if [ -x "$build/bench/bench_gpu" ]; then
    bench_output=$(within "$build/bench/bench_gpu")
    bench_status=$?
    echo "$bench_output"
    if [ $bench_status -ne 0 ]; then
      failures+=("bench_gpu")
      suite bench_gpu "FAILED (exit $bench_status)"
    elif [[ "$listed_vendors" == *nvidia* ]] && grep -q '^skipped' <<<"$bench_output"; then
      failures+=("bench_gpu skipped although a GPU is listed")
      suite bench_gpu "FAILED: skipped although a GPU is listed: $(grep '^skipped' <<<"$bench_output" | cut -f3)"
    elif grep -q '^skipped' <<<"$bench_output"; then
      suite bench_gpu "skipped: $(grep '^skipped' <<<"$bench_output" | cut -f3)"
    else
      suite bench_gpu "passed (figures below)"
    fi
  else
    suite bench_gpu "not run (not built: no CUDA toolkit)"
  fi
  if [ -x "$build/bench/bench_host" ]; then
    within "$build/bench/bench_host" | grep -E "export|pooled|fresh"
    [ "${PIPESTATUS[0]}" -eq 0 ] || failures+=("bench_host")
  fi
else
  suite bench_gpu "not run ($(step bench && echo "the build failed" || echo "step not requested"))"
fi

python_log=$log_dir/python-gpu.log
python_results=$build_abs/python-gpu
python_lines=""
if step python && ! failed build; then
  echo "== Python GPU suite ($python)"
  if [ -n "${DL_SYNC_GPU_CHECK_PYTHONPATH:-}" ]; then
    install_status=0
    echo "dlsync: the module installed in $python_site"
  else
    python_install_wait
    tail -n 3 "$python_install_log"
  fi
  if [ "$install_status" -ne 0 ]; then
    [ "$install_status" -eq 124 ] || [ "$install_status" -eq 137 ] && deadline_hit=1
    failures+=("python_gpu")
    suite python_gpu "FAILED: the module dlsync could not be installed for $python (exit $install_status; $python_install_log)"
  else
    rm -rf "$python_results"
    PYTHONPATH="$python_site" PYTHONDONTWRITEBYTECODE=1 \
      DL_SYNC_GPU_TEST_KERNELS="$build_abs/tests/gpu/libdl_sync_gpu_test_kernels.so" \
      within "$python" python/tests/gpu/run_gpu_suite.py --results "$python_results" >"$python_log" 2>&1
    python_status=$?
    python_lines=$(grep -E '^python_gpu: ' "$python_log")
    grep -E '^python_gpu: (python|frameworks|summary|skipped):|: (FAILED|ERROR)|: skipped: no ' <<<"$python_lines" | sed 's/^/  /'
    summary=$(sed -nE 's/^python_gpu: summary: //p' <<<"$python_lines")
    read -r ordered controls raced <<<"$(counts_of "$summary")"
    no_gpu_skips=$(grep -cE '^python_gpu: test .*: skipped: (no GPU|no gate kernels):' <<<"$python_lines")
    other_skips=$(grep -E '^python_gpu: test .*: skipped: ' <<<"$python_lines" | sed -E 's/.*: skipped: //' | awk '!seen[$0]++' | paste -sd ';' -)
    failing=$(grep -E '^python_gpu: test .*: (FAILED|ERROR)' <<<"$python_lines" | sed -E 's/^python_gpu: test ([^:]+): .*/\1/' | paste -sd ' ' -)
    if [ $python_status -eq 124 ] || [ $python_status -eq 137 ]; then
      suite python_gpu "FAILED: stopped at the deadline ($python_log)"
      failures+=("python_gpu")
    elif [ $python_status -eq 77 ]; then
      skipped=$(sed -nE 's/^python_gpu: skipped: //p' <<<"$python_lines")
      if [[ "$listed_vendors" == *nvidia* ]]; then
        suite python_gpu "FAILED: skipped although a GPU is listed: $skipped"
        failures+=("python_gpu")
      else
        suite python_gpu "skipped: $skipped"
      fi
    elif [ $python_status -ne 0 ] || [ -z "$summary" ]; then
      suite python_gpu "FAILED (exit $python_status): ${failing:-see $python_log}"
      failures+=("python_gpu")
    elif [[ "$listed_vendors" == *nvidia* ]] && [ "$no_gpu_skips" -gt 0 ]; then
      suite python_gpu "FAILED: $no_gpu_skips tests skipped for want of a GPU or the gate kernels although a GPU is listed"
      failures+=("python_gpu")
    elif [ "${controls:-0}" -eq 0 ] || [ "$raced" != "$controls" ]; then
      suite python_gpu "FAILED: passed without every control observing its race ($summary)"
      failures+=("python_gpu")
    else
      suite python_gpu "passed ($summary)${other_skips:+; skipped: $other_skips}"
    fi
  fi
elif step python; then
  suite python_gpu "not run (the build failed)"
else
  suite python_gpu "not run (step not requested)"
fi
# The ordering audit of the frameworks (python -m dlsync.audit, docs/audit.md), gated by the
# driver: the frameworks' pairs are reported, not asserted; dlsync's reference producer must
# be ordered and its control (no dlsync.export) a RACE in every stream cell they ran.
audit_log=$log_dir/audit.log
audit_pairs=(torch:cupy cupy:torch torch:jax jax:torch torch:cuda.core cuda.core:torch
             dlsync:torch dlsync:cupy dlsync-control:torch dlsync-control:cupy)
audit_lines=""
if step audit && ! failed build; then
  echo "== dlsync.audit ($python)"
  python_install_wait
  if [ "$install_status" -ne 0 ]; then
    [ "$install_status" -eq 124 ] || [ "$install_status" -eq 137 ] && deadline_hit=1
    failures+=("dlsync_audit")
    suite dlsync_audit "FAILED: the module dlsync could not be installed for $python (exit $install_status; $python_install_log)"
  else
    mkdir -p "$python_results"
    pair_args=()
    for pair in "${audit_pairs[@]}"; do pair_args+=(--pair "$pair"); done
    PYTHONPATH="$python_site" PYTHONDONTWRITEBYTECODE=1 \
      within "$python" -m dlsync.audit --allow-race --json "$python_results/audit.json" \
      --markdown "$python_results/audit.md" "${pair_args[@]}" >"$audit_log" 2>&1
    audit_status=$?
    audit_lines=$(grep -E '^dlsync\.audit: ' "$audit_log")
    grep -E '^dlsync\.audit: (device|warning|summary|controls|reference|exit)' <<<"$audit_lines" | sed 's/^/  /'
    audit_summary=$(sed -nE 's/^dlsync\.audit: summary: //p' <<<"$audit_lines")
    read -r control_cells control_races <<<"$(sed -nE 's/^dlsync\.audit: controls: stream cells ([0-9]+), RACE ([0-9]+)$/\1 \2/p' <<<"$audit_lines")"
    read -r reference_cells reference_ordered <<<"$(sed -nE 's/^dlsync\.audit: reference: stream cells ([0-9]+), ordered ([0-9]+)$/\1 \2/p' <<<"$audit_lines")"
    if [ $audit_status -eq 124 ] || [ $audit_status -eq 137 ]; then
      suite dlsync_audit "FAILED: stopped at the deadline ($audit_log)"
      failures+=("dlsync_audit")
    elif [ $audit_status -eq 3 ]; then
      why=$(sed -nE 's/^dlsync\.audit: frameworks: //p' <<<"$audit_lines")
      if [[ "$listed_vendors" == *nvidia* ]]; then
        suite dlsync_audit "FAILED: no pair could run although a GPU is listed: $why"
        failures+=("dlsync_audit")
      else
        suite dlsync_audit "skipped: no pair could run here: $why"
      fi
    elif [ $audit_status -ne 0 ] || [ -z "$audit_summary" ]; then
      suite dlsync_audit "FAILED (exit $audit_status; $audit_log)"
      failures+=("dlsync_audit")
    elif [ "${control_cells:-0}" -eq 0 ] || [ "$control_races" != "$control_cells" ]; then
      suite dlsync_audit "FAILED: the control did not show a RACE in every stream cell (RACE ${control_races:-0} of ${control_cells:-0}; $audit_log)"
      failures+=("dlsync_audit")
    elif [ "${reference_cells:-0}" -eq 0 ] || [ "$reference_ordered" != "$reference_cells" ]; then
      suite dlsync_audit "FAILED: dlsync's reference was not ordered in every stream cell (ordered ${reference_ordered:-0} of ${reference_cells:-0}; $audit_log)"
      failures+=("dlsync_audit")
    else
      suite dlsync_audit "passed ($audit_summary; the control's RACE in $control_races of $control_cells stream cells, the reference ordered in $reference_ordered of $reference_cells)"
    fi
  fi
elif step audit; then
  suite dlsync_audit "not run (the build failed)"
else
  suite dlsync_audit "not run (step not requested)"
fi

# The module's install, started with the build, ends within the deadline in any case.
[ -n "$python_install_pid" ] && wait "$python_install_pid" 2>/dev/null

if step others && ! failed build; then
  echo "== other suites on the CUDA build"
  within ctest --test-dir "$build" -LE gpu -j"$(nproc)" >"$log_dir/other-suites.log" 2>&1
  others_status=$?
  grep -E "tests passed|\(Failed\)|\(Timeout\)|\*\*\*Failed" "$log_dir/other-suites.log"
  others_summary=$(grep -E "tests passed" "$log_dir/other-suites.log" | tail -n 1)
  if [ $others_status -ne 0 ]; then
    failures+=("other suites")
    suite "other suites" "FAILED: ${others_summary:-ctest exited $others_status}"
  else
    suite "other suites" "passed ($others_summary)"
  fi
else
  suite "other suites" "not run ($(step others && echo "the build failed" || echo "step not requested"))"
fi

if step synccheck && ! failed build; then
  echo "== compute-sanitizer --tool synccheck"
  for name in gpu_ordering_legacy gpu_ordering_per_thread gpu_contexts gpu_release; do
    binary=$build/tests/gpu/test_$name
    [ -x "$binary" ] || continue
    CUDA_MODULE_LOADING=EAGER within compute-sanitizer --tool synccheck --error-exitcode 1 "$binary" \
      >"$log_dir/synccheck-$name.log" 2>&1
    status=$?
    if [ $status -eq 0 ]; then suite "synccheck $name" passed; else
      suite "synccheck $name" "FAILED (exit $status; $log_dir/synccheck-$name.log)"
      failures+=("synccheck_$name")
    fi
  done
fi

[ $deadline_hit -eq 1 ] && failures+=("deadline of ${limit}s")
if [ ${#failures[@]} -gt 0 ]; then
  verdict="FAILED: ${failures[*]}"
elif [ $suites_ran -eq 1 ] && [ -z "$listed" ] &&
     printf '%s\n' "${suite_lines[@]}" | grep -qv $'\tpassed'; then
  verdict="SKIPPED: no GPU is listed here; nothing above ran on a device"
else
  verdict="PASSED"
fi

# The results file: what ran, on what, with what result; every line from this run.
write_results() {
  local file=$1
  mkdir -p "$(dirname "$file")"
  {
    echo "# GPU check results"
    echo
    echo "Written by \`scripts/gpu-check.sh\` in one run; never edited by hand. A suite that did"
    echo "not run says so (\"not run\"); only \"passed\" means that it ran and passed."
    echo
    echo "- verdict: **$verdict**"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), elapsed ${SECONDS} s of the ${limit} s deadline"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ', with local changes')"
    echo "- GPUs listed: $([ -n "$listed" ] && paste -sd ';' - <<<"$listed" || echo none)"
    echo "- device (name, driver, memory): ${gpu_query:-unknown}"
    echo "- as the suites saw it: ${device_line:-not run}"
    echo "- toolkit: ${nvcc_version:-nvcc not found or the build step did not run}"
    echo "- Python: $(sed -nE 's/^python_gpu: python: //p' <<<"$python_lines" | head -n 1 | grep . || echo "not run")"
    echo "- frameworks: $(sed -nE 's/^python_gpu: frameworks: //p' <<<"$python_lines" | head -n 1 | grep . || echo "not run")"
    echo
    echo "## Suites"
    echo
    echo "| suite | result |"
    echo "|---|---|"
    local line
    for line in "${suite_lines[@]}"; do
      printf '| %s | %s |\n' "${line%%$'\t'*}" "$(sed 's/|/\//g' <<<"${line#*$'\t'}")"
    done
    echo
    echo "## bench_gpu: µs per exchange, side by side in one run"
    echo
    if grep -qE '^gpu: ' <<<"$bench_output"; then
      echo "| figure | value | unit |"
      echo "|---|---:|---|"
      grep -E '^gpu: ' <<<"$bench_output" | awk -F'\t' '{ printf "| %s | %s | %s |\n", substr($1, 6), $2, $3 }'
    else
      echo "not run"
    fi
    local table
    echo
    echo "## dlsync.audit: the frameworks' ordering (\`python -m dlsync.audit\`; reported, not asserted but for dlsync's reference and control)"
    echo
    echo "- $(sed -nE 's/^dlsync\.audit: (device: .*)/\1/p' <<<"$audit_lines" | head -n 1 | grep . || echo "not run")"
    echo
    if [ -f "$python_results/audit.md" ]; then cat "$python_results/audit.md"; else echo "not run"; fi
    for table in audit-controls:"Python: dlsync.audit's gate on dlsync's reference and its control (asserted)" \
                 exchange-tables:"Python: the frameworks' DLPack exchange tables (reported, not asserted)" \
                 python-cost:"Python: cost per exchange, side by side in one run"; do
      echo
      echo "## ${table#*:}"
      echo
      if [ -f "$python_results/${table%%:*}.md" ]; then cat "$python_results/${table%%:*}.md"; else echo "not run"; fi
    done
    echo
    echo "## Python tests"
    echo
    if grep -q '^python_gpu: test ' <<<"$python_lines"; then
      echo "| test | result |"
      echo "|---|---|"
      sed -nE 's/^python_gpu: test ([^:]+): (.*)/| \1 | \2 |/p' <<<"$python_lines"
    else
      echo "not run"
    fi
  } >"$file"
  echo "results: written to $file"
}
echo "== report"
if step results && [ -n "$results_file" ]; then write_results "$results_file"; fi
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), elapsed: ${SECONDS}s of ${limit}s"
echo "GPUs listed: $([ -n "$listed" ] && grep -c . <<<"$listed" || echo none)"
for line in "${suite_lines[@]}"; do echo "suite ${line%%$'\t'*}: ${line#*$'\t'}"; done
echo "gpu-check: $verdict"
[[ "$verdict" == FAILED* ]] && exit 1
exit 0
