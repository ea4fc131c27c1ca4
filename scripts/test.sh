#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite on a fresh Debian machine: installs what it needs (as root),
# builds with every backend found and -Werror under gcc and clang, runs ctest, and checks
# the installed CMake package and pkg-config file from a separate consumer project.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# The PyPI packages whose DLPack exchange tables the Python suites test (pinned).
bash scripts/install-python-test-deps.sh build/pypi-site
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
cuda_args=()
[ -x "$cuda_root/bin/nvcc" ] &&
  cuda_args=(-DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")

jobs=$(nproc)
mkdir -p build
for cc in gcc clang; do
  build=build/ci-$cc
  cxx=g++ && [ $cc = clang ] && cxx=clang++ # for the C++ header checks (tests/abi)
  echo "== $cc: configure, build, test"
  cmake -S . -B "$build" -DCMAKE_C_COMPILER=$cc -DCMAKE_CXX_COMPILER=$cxx -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDL_SYNC_WERROR=ON -DDL_SYNC_BUILD_BENCH=ON "${cuda_args[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
  grep "dlsync backends" "$build.configure.log"
  cmake --build "$build" -j"$jobs"
  ctest --test-dir "$build" --output-on-failure -j"$jobs"
done

# The nanobind and pybind11 samples as a user installs them: a fresh venv, pip with build
# isolation (scikit-build-core, nanobind, pybind11 pinned from PyPI), their tests.
echo "== binding samples: pip install samples/nanobind samples/pybind11, tests"
bash samples/nanobind/pip_check.sh /usr/bin/python3 build/bindings-check

sanitized() { # name, C flags, extra cmake arguments...
  local name=$1 flags=$2
  shift 2
  echo "== $name: configure, build, test"
  cmake -S . -B build/ci-$name -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
    -DDL_SYNC_WERROR=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
    -DDL_SYNC_BUILD_PYTHON=OFF \
    -DCMAKE_C_FLAGS="$flags -g -O1 -fno-omit-frame-pointer" -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="$flags -g -O1 -fno-omit-frame-pointer" "$@" >build/ci-$name.configure.log 2>&1 ||
    { cat build/ci-$name.configure.log; exit 1; }
  cmake --build build/ci-$name -j"$jobs"
  ctest --test-dir build/ci-$name --output-on-failure -j"$jobs"
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1
sanitized asan-ubsan "-fsanitize=address,undefined -fno-sanitize-recover=undefined" -DDL_SYNC_BUILD_FUZZERS=ON
sanitized tsan "-fsanitize=thread"

# Linux aarch64: cross-built, every suite but those that measure the host process itself
# (label native) run under qemu-user, the demo included (cmake/toolchains/).
echo "== aarch64 (qemu-user): configure, build, test"
bash scripts/install-deps.sh gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user \
  libcmocka-dev:arm64 libstdc++6:arm64
cmake -S . -B build/ci-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_SYNC_WERROR=ON -DDL_SYNC_BUILD_PYTHON=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >build/ci-aarch64.configure.log 2>&1 ||
  { cat build/ci-aarch64.configure.log; exit 1; }
cmake --build build/ci-aarch64 -j"$jobs"
ctest --test-dir build/ci-aarch64 --output-on-failure -j"$jobs" -LE native --timeout 300
for mode in "" --no-sync; do
  { qemu-aarch64 build/ci-aarch64/samples/exchange/dlsync_exchange_demo --rounds 1 $mode || true; } |
    grep -E "^(race checker|verdict):" | paste -sd ' ' | sed "s/^/aarch64 demo ${mode:-with dlsync}: /"
done

# Windows x86_64: built with MinGW-w64, the unit, simulator, bad-input and fake-driver
# (nvcuda.dll) suites and the demo run under Wine (tests/CMakeLists.txt says which suites
# are POSIX-only).
echo "== windows (MinGW-w64, Wine): configure, build, test"
bash scripts/install-deps.sh gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 wine wine64 dpkg-dev
bash tests/windows/build-cmocka.sh build/cmocka-mingw build/mingw-prefix
PKG_CONFIG_LIBDIR=$PWD/build/mingw-prefix/lib/pkgconfig cmake -S . -B build/ci-windows \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-w64-mingw32.cmake \
  -DDL_SYNC_MINGW_PREFIX="$PWD/build/mingw-prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDL_SYNC_WERROR=ON -DDL_SYNC_BUILD_PYTHON=OFF >build/ci-windows.configure.log 2>&1 ||
  { cat build/ci-windows.configure.log; exit 1; }
cmake --build build/ci-windows -j"$jobs"
export WINEPREFIX=$PWD/build/wineprefix DL_SYNC_WINEPATH=$PWD/build/mingw-prefix/bin
WINEDEBUG=-all wineboot --init >/dev/null 2>&1 # the prefix made once, before tests run at once
# One Wine server for the whole run (started once wineboot's has gone): a client that
# starts while the server of the last one shuts down is dropped ("recvmsg: Connection
# reset by peer"), and such a test runs again.
wineserver -w
wineserver -p
# and its session started (services, devices) by one program before the tests: a test that
# is the first program of a session may hang while that happens.
WINEDEBUG=-all wine cmd /c exit >/dev/null 2>&1 || true
ctest --test-dir build/ci-windows --output-on-failure -j"$jobs" --timeout 300 --repeat until-pass:2
for mode in "" --no-sync; do
  { cmake/toolchains/wine-run.sh build/ci-windows build/ci-windows/samples/exchange/dlsync_exchange_demo.exe \
      --rounds 1 $mode || true; } |
    grep -E "^(race checker|verdict):" | tr -d '\r' | paste -sd ' ' | sed "s/^/windows demo ${mode:-with dlsync}: /"
done
wineserver -k || true
unset WINEPREFIX DL_SYNC_WINEPATH

echo "== fuzzing: each target for ${DL_SYNC_FUZZ_SECONDS:=60} s"
for target in stream_arg exchange tensor_events tensor_recognition; do
  scratch=$(mktemp -d)
  build/ci-asan-ubsan/tests/fuzz/fuzz_$target -max_total_time="$DL_SYNC_FUZZ_SECONDS" \
    -print_final_stats=1 "$scratch" tests/fuzz/corpus/$target 2>&1 |
    grep -E "number_of_executed_units|ERROR|SUMMARY" | sed "s/^/fuzz_$target: /"
  test "${PIPESTATUS[0]}" -eq 0 || { echo "fuzz_$target found a crash" >&2; exit 1; }
  rm -rf "$scratch"
done

# Random whole programs on new seeds (tests/scenarios): a failing one prints its seed.
echo "== random programs for ${DL_SYNC_SCENARIO_SECONDS:=60} s"
build/ci-gcc/tests/test_scenarios --seconds "$DL_SYNC_SCENARIO_SECONDS"
# The same over the fake CUDA driver, with contexts and green contexts (tests/runtimes), under
# both readings of a green context's events.
for fake in "driver124 strict" "driver13 strict" "driver13 lenient"; do
  read -r driver rule <<<"$fake"
  echo "== random driver programs over the $driver fake ($rule green event rule) for ${DL_SYNC_DRIVER_PROGRAM_SECONDS:=20} s"
  DL_SYNC_LIBCUDA=$PWD/build/ci-gcc/tests/runtimes/$driver/libcuda.so.1 FAKE_CUDA_GREEN_EVENT_RULE=$rule \
    build/ci-gcc/tests/runtimes/test_driver_programs --seconds "$DL_SYNC_DRIVER_PROGRAM_SECONDS"
done

echo "== valgrind memcheck: unit suites"
for t in $(ctest --test-dir build/ci-gcc -L unit -N | sed -n 's/^ *Test *#[0-9]*: //p'); do
  exe=$(find build/ci-gcc/tests -maxdepth 1 -name "test_$t" -type f | head -n 1)
  [ -n "$exe" ] || continue
  valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    "$exe" >build/valgrind-$t.log 2>&1 || { cat build/valgrind-$t.log; exit 1; }
  echo "valgrind $t: clean"
done

echo "== install and use as a package"
prefix=$(mktemp -d)
cmake --install build/ci-gcc --prefix "$prefix" >/dev/null
cmake -S tests/install -B build/install-check -DCMAKE_PREFIX_PATH="$prefix" "${cuda_args[@]}" >/dev/null
cmake --build build/install-check
build/install-check/use_cmake_package
build/install-check/use_cmake_package_static
PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig" \
  sh -c 'cc -std=c11 -Wall -Werror tests/install/use.c $(pkg-config --cflags --libs dlsync) \
         -Wl,-rpath,$(pkg-config --variable=libdir dlsync) -o build/install-check/use_pkg_config'
build/install-check/use_pkg_config
build/install-check/use_cmake_package_sim
build/install-check/use_cmake_package_sim_static
PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig" \
  sh -c 'cc -std=c11 -Wall -Werror tests/install/use_sim.c $(pkg-config --cflags --libs dlsync-sim) \
         -Wl,-rpath,$(pkg-config --variable=libdir dlsync-sim) -o build/install-check/use_pkg_config_sim'
build/install-check/use_pkg_config_sim
rm -rf "$prefix"

echo "== adding dlsync to a project: one file, CMake FetchContent, Meson"
# The one-file distribution, compiled with plain cc (gcc, clang): tests/amalgamation/check.sh.
bash tests/amalgamation/check.sh build/amalgamation-check
# FetchContent from this tree: the parent's build makes only the static libraries it links,
# and its install holds its own program, nothing of dlsync.
prefix=$(mktemp -d)
cmake -S tests/fetchcontent -B build/fetchcontent-check -DDLSYNC_SOURCE="$PWD" \
  -DCMAKE_INSTALL_PREFIX="$prefix" >build/fetchcontent-check.log 2>&1 ||
  { cat build/fetchcontent-check.log; exit 1; }
grep "as a subproject" build/fetchcontent-check.log
cmake --build build/fetchcontent-check -j"$jobs" >/dev/null
cmake --install build/fetchcontent-check >/dev/null
installed=$(cd "$prefix" && find . ! -type d | sort | tr '\n' ' ')
[ "$installed" = "./bin/framework " ] ||
  { echo "FetchContent: the parent's install holds $installed" >&2; exit 1; }
built=$(find build/fetchcontent-check -type f -name 'libdlsync*.so*')
[ -z "$built" ] || { echo "FetchContent: built what the parent does not link: $built" >&2; exit 1; }
"$prefix/bin/framework"
rm -rf "$prefix"
# Meson (Debian's): the library, the simulator and the unit suites, once.
meson setup build/meson-check -Dwerror=true >build/meson-check.log 2>&1 ||
  { cat build/meson-check.log; exit 1; }
ninja -C build/meson-check >/dev/null
meson test -C build/meson-check --suite unit --num-processes "$jobs" --print-errorlogs |
  grep -E "^(Ok|Fail|Timeout):"
# And as a subproject of a consumer, through the wrap's [provide], statically linked.
rm -rf build/meson-consumer && cp -r tests/meson_consumer build/meson-consumer
ln -s "$PWD" build/meson-consumer/subprojects/dlsync
meson setup build/meson-consumer/build build/meson-consumer -Dwerror=true \
  >build/meson-consumer.log 2>&1 || { cat build/meson-consumer.log; exit 1; }
grep "as a subproject" build/meson-consumer.log
ninja -C build/meson-consumer/build >/dev/null
built=$(find build/meson-consumer/build -type f -name 'libdlsync*.so*')
[ -z "$built" ] || { echo "Meson subproject: built $built" >&2; exit 1; }
build/meson-consumer/build/framework
rm build/meson-consumer/subprojects/dlsync # the link back to this tree
echo "all checks passed"
