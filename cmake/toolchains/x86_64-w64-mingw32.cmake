# SPDX-License-Identifier: Apache-2.0
# Windows x86_64 with Debian's MinGW-w64 (gcc-mingw-w64-x86-64, winpthreads); the tests
# run under Wine (wine64), through wine-run.sh, which finds the build's DLLs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
# DL_SYNC_MINGW_PREFIX: where libraries built for MinGW are installed (cmocka, for the
# tests: scripts/test.sh builds it from Debian's source package).
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32 ${DL_SYNC_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/wine-run.sh;${CMAKE_BINARY_DIR})
