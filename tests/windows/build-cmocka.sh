#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cmocka for MinGW-w64, built from Debian's source package (there is no MinGW package of
# it), installed into PREFIX for the Windows build of the test suites. Needs the deb-src
# entry of Debian's main archive, which it adds (as root) when apt has none.
# Usage: tests/windows/build-cmocka.sh WORK_DIR PREFIX
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "$1") prefix=$(realpath -m "$2")
[ -f "$prefix/lib/pkgconfig/cmocka.pc" ] && exit 0
mkdir -p "$work"
cd "$work"
if ! ls cmocka-*/CMakeLists.txt >/dev/null 2>&1; then
  if ! apt-get source --print-uris cmocka >/dev/null 2>&1; then
    # The suite of the installed system (bookworm, trixie, ...), main component.
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$suite" >/etc/apt/sources.list.d/dlsync-deb-src.sources
    apt-get update -qq
  fi
  apt-get source -qq cmocka >/dev/null 2>&1
fi
source_dir=$(ls -d cmocka-*/ | head -n 1)
cmake -S "$source_dir" -B build -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/x86_64-w64-mingw32.cmake" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release -DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF \
  >configure.log 2>&1 || { cat configure.log; exit 1; }
cmake --build build --target install >build.log 2>&1 || { cat build.log; exit 1; }
echo "cmocka for MinGW-w64: $(basename "$source_dir") in $prefix"
