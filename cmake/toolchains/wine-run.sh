#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs a Windows program of a build under Wine (the emulator the MinGW-w64 toolchain file
# names). DLLs are searched in the program's folder, the build's library folders, MinGW's
# runtime and DL_SYNC_WINEPATH (say, cmocka's bin/); Wine's own messages are left out.
# Usage: wine-run.sh BUILD_DIR PROGRAM [ARGUMENT...]
build=$1 program=$2
shift 2
gcc_dir=$(dirname "$(x86_64-w64-mingw32-gcc -print-libgcc-file-name)")
export WINEDEBUG=${WINEDEBUG:--all}
export WINEPATH="$(dirname "$program");$build/sync;$build/sync/sim;$gcc_dir;/usr/x86_64-w64-mingw32/lib;${DL_SYNC_WINEPATH:-}"
exec wine "$program" "$@"
