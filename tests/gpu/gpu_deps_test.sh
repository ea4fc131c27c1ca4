#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu-check.sh's carried packages, without a network: tiny .deb files built here
# with dpkg-deb stand in for cmocka's (a runtime package with its shared library; a
# development package with a header, the library's link and a .pc file naming /usr as
# Debian's libcmocka-dev does), and are unpacked by the script's deps step into a prefix
# under its build folder. Then a program is compiled, linked and run through pkg-config,
# and through CMake's pkg_check_modules, with the paths the step printed: it must get the
# carried header and library, not the machine's. Also: without dpkg (ar and tar), a package
# of another architecture (left out), no pkg-config on PATH (a carried pkgconf), and no
# packages at all (a failure that says what to do).
# Usage: gpu_deps_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
for tool in dpkg-deb cc ar pkg-config; do
  command -v $tool >/dev/null 2>&1 || { echo "skipped: $tool is not installed"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
multiarch=$(cc -print-multiarch 2>/dev/null)
[ -n "$multiarch" ] || multiarch=$(uname -m)-linux-gnu
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
other_arch=s390x
[ "$arch" = s390x ] && other_arch=amd64

# mk_deb NAME ARCH TREE: TREE's files as a package, in $work/debs.
mkdir -p "$work/debs"
mk_deb() {
  mkdir -p "$3/DEBIAN"
  printf 'Package: %s\nVersion: 9.9.9-1\nArchitecture: %s\nMaintainer: dlsync tests <tests@localhost>\nDescription: a stand-in for a carried package\n' \
    "$1" "$2" >"$3/DEBIAN/control"
  dpkg-deb --root-owner-group -Zxz --build "$3" "$work/debs/${1}_9.9.9-1_$2.deb" >/dev/null
}
runtime=$work/trees/runtime dev=$work/trees/dev
mkdir -p "$runtime/usr/lib/$multiarch" "$dev/usr/lib/$multiarch/pkgconfig" "$dev/usr/include"
echo 'int cmocka_carried_answer(void) { return 42; }' >"$work/lib.c"
cc -shared -fPIC -Wl,-soname,libcmocka.so.0 -o "$runtime/usr/lib/$multiarch/libcmocka.so.0" "$work/lib.c"
ln -s libcmocka.so.0 "$dev/usr/lib/$multiarch/libcmocka.so"
echo 'int cmocka_carried_answer(void);' >"$dev/usr/include/cmocka_carried_test.h"
cat >"$dev/usr/lib/$multiarch/pkgconfig/cmocka.pc" <<EOF
Name: cmocka
Description: The cmocka unit testing library
Version: 9.9.9
Libs: -L/usr/lib/$multiarch -lcmocka
Cflags: -I/usr/include
EOF
mk_deb libcmocka0 "$arch" "$runtime"
mk_deb libcmocka-dev "$arch" "$dev"
mkdir -p "$work/trees/foreign/usr/include"
echo '#error the package of another architecture was unpacked' >"$work/trees/foreign/usr/include/cmocka_foreign_arch.h"
mk_deb libcmocka-foreign "$other_arch" "$work/trees/foreign"
cat >"$work/t.c" <<'EOF'
#include <stdio.h>
#include "cmocka_carried_test.h"
int main(void) { printf("%d\n", cmocka_carried_answer()); return 0; }
EOF

# deps NAME EXPECTED_STATUS [VAR=VALUE...]: runs the deps step; its output in $output.
deps() {
  local name=$1 expected=$2
  shift 2
  rm -rf "$work/build"
  output=$(env DL_SYNC_GPU_DEPS="$work/debs" DL_SYNC_GPU_CHECK_CARRIED=always \
    DL_SYNC_GPU_CHECK_BUILD="$work/build" DL_SYNC_GPU_CHECK_STEPS=deps "$@" \
    bash "$source_dir/scripts/gpu-check.sh" 2>&1)
  local status=$?
  [ $status -eq "$expected" ] || { fail "$name: exit $status, expected $expected"; echo "$output"; return 1; }
}
# uses_carried NAME: the step's paths give the carried header and library, through
# pkg-config and through CMake.
uses_carried() {
  local name=$1 pc_path ld_path
  pc_path=$(sed -n 's/^carried: PKG_CONFIG_PATH=//p' <<<"$output")
  ld_path=$(sed -n 's/^carried: LD_LIBRARY_PATH=//p' <<<"$output")
  [ -f "$work/build/deps/usr/include/cmocka_carried_test.h" ] ||
    fail "$name: the header is not under the build folder's prefix"
  [ -e /usr/include/cmocka_carried_test.h ] && fail "$name: a carried file was written outside the prefix"
  [ -e "$work/build/deps/usr/include/cmocka_foreign_arch.h" ] &&
    fail "$name: the package for $other_arch was unpacked"
  grep -q "libcmocka-foreign_9.9.9-1_$other_arch.deb is for $other_arch, this machine is $arch: not used" <<<"$output" ||
    fail "$name: the package of another architecture was not reported"
  grep -q "^carried: cmocka 9.9.9: -I$work/build/deps/usr/include -L$work/build/deps/usr/lib/$multiarch -lcmocka" <<<"$output" ||
    { fail "$name: cmocka not found with the prefix's paths"; echo "$output"; }
  local flags
  flags=$(PKG_CONFIG_PATH=$pc_path pkg-config --cflags --libs cmocka)
  # shellcheck disable=SC2086
  cc -o "$work/t" "$work/t.c" $flags 2>"$work/cc.log" || { fail "$name: cc with $flags"; cat "$work/cc.log"; }
  [ "$(LD_LIBRARY_PATH=$ld_path "$work/t" 2>&1)" = 42 ] || fail "$name: the program did not run on the carried library"
}

deps "dpkg-deb -x" 0 && uses_carried "dpkg-deb -x" && echo "ok: carried packages unpacked with dpkg-deb"
# What gpu-check.sh's build relies on: pkg_check_modules finds the carried cmocka, links
# it by its full path, and the build tree's run path finds it at run time.
if command -v cmake >/dev/null 2>&1; then
  mkdir -p "$work/cmake"
  cat >"$work/cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(carried C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
add_executable(t $work/t.c)
target_link_libraries(t PRIVATE PkgConfig::CMOCKA)
EOF
  pc_path=$(sed -n 's/^carried: PKG_CONFIG_PATH=//p' <<<"$output")
  if PKG_CONFIG_PATH=$pc_path cmake -S "$work/cmake" -B "$work/cmake/build" >"$work/cmake.log" 2>&1 &&
     cmake --build "$work/cmake/build" >>"$work/cmake.log" 2>&1; then
    [ "$("$work/cmake/build/t" 2>&1)" = 42 ] || fail "CMake: the program did not run on the carried library"
    grep -q "$work/build/deps/usr/lib/$multiarch/libcmocka.so" "$work/cmake/build/CMakeCache.txt" ||
      fail "CMake: CMOCKA's library is not the carried one"
    echo "ok: CMake's pkg_check_modules builds against the carried cmocka"
  else
    fail "CMake: configuring or building against the carried cmocka"; cat "$work/cmake.log"
  fi
fi
deps "ar and tar" 0 DL_SYNC_GPU_CHECK_NO_DPKG=1 && uses_carried "ar and tar" &&
  echo "ok: carried packages unpacked without dpkg (ar and tar)"

# No pkg-config on PATH: the carried pkgconf (here the machine's own, packaged) serves.
pkgconf_bin=$(command -v pkgconf || true)
pkgconf_lib=$(ls /usr/lib/"$multiarch"/libpkgconf.so.* 2>/dev/null | head -n 1)
if [ -n "$pkgconf_bin" ] && [ -n "$pkgconf_lib" ]; then
  mkdir -p "$work/trees/pkgconf/usr/bin" "$work/trees/libpkgconf/usr/lib/$multiarch" "$work/path"
  cp "$pkgconf_bin" "$work/trees/pkgconf/usr/bin/pkgconf"
  cp -P /usr/lib/"$multiarch"/libpkgconf.so.* "$work/trees/libpkgconf/usr/lib/$multiarch/"
  mk_deb pkgconf-bin "$arch" "$work/trees/pkgconf"
  mk_deb libpkgconf3 "$arch" "$work/trees/libpkgconf"
  for dir in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do # the machine's tools, as links
    [ -d "$dir" ] && cp -sn "$dir"/* "$work/path/" 2>/dev/null
  done
  rm -f "$work/path/"*pkg-config* "$work/path/"pkgconf*
  if deps "no pkg-config" 0 PATH="$work/path"; then
    grep -q "^carried: cmocka 9.9.9: -I$work/build/deps/usr/include" <<<"$output" &&
      [ -x "$work/build/deps/bin/pkg-config" ] && echo "ok: no pkg-config on PATH: the carried pkgconf finds cmocka" ||
      { fail "no pkg-config: cmocka not found through the carried pkgconf"; echo "$output"; }
  fi
fi

# Nothing carried: the step fails and says what to run, and where.
mkdir -p "$work/empty"
if deps "no packages" 1 DL_SYNC_GPU_DEPS="$work/empty"; then
  grep -q "gpu-check: FAILED: carried packages" <<<"$output" && echo "ok: no carried packages: a failure" ||
    { fail "no packages: no failure named"; echo "$output"; }
fi
# cmocka missing (no .pc file where pkg-config looks), nothing carried, no apt to use.
rm -rf "$work/build"
output=$(env DL_SYNC_GPU_DEPS="$work/empty" DL_SYNC_GPU_CHECK_BUILD="$work/build" DL_SYNC_GPU_CHECK_STEPS=deps \
  DL_SYNC_GPU_CHECK_NO_APT=1 PKG_CONFIG_PATH="$work/empty" PKG_CONFIG_LIBDIR="$work/empty" \
  bash "$source_dir/scripts/gpu-check.sh" 2>&1)
status=$?
[ $status -eq 1 ] && grep -q "run scripts/fetch-gpu-deps.sh on a machine with apt" <<<"$output" &&
  echo "ok: cmocka missing, nothing carried: says to run fetch-gpu-deps.sh" ||
  { fail "cmocka missing: no pointer to fetch-gpu-deps.sh"; echo "$output"; }

[ $failures -eq 0 ] && echo "all carried-package checks as expected"
exit $((failures > 0))
