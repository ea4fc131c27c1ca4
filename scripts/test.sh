#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what it needs (as root),
# builds with every backend found and -Werror under gcc and clang, runs ctest, and checks
# the installed CMake package and pkg-config file from a separate consumer project.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
cuda_args=()
[ -x "$cuda_root/bin/nvcc" ] && cuda_args=(-DCUDAToolkit_ROOT="$cuda_root")

jobs=$(nproc)
for cc in gcc clang; do
  build=build/ci-$cc
  echo "== $cc: configure, build, test"
  cmake -S . -B "$build" -DCMAKE_C_COMPILER=$cc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDL_SYNC_WERROR=ON -DDL_SYNC_BUILD_BENCH=ON "${cuda_args[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
  grep "dlsync backends" "$build.configure.log"
  cmake --build "$build" -j"$jobs"
  ctest --test-dir "$build" --output-on-failure -j"$jobs"
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
rm -rf "$prefix"
echo "all checks passed"
