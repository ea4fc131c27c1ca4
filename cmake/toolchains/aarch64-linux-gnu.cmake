# SPDX-License-Identifier: Apache-2.0
# Linux aarch64 with Debian's cross compilers (gcc- and g++-aarch64-linux-gnu); the tests
# run under qemu-user (qemu-aarch64) with the arm64 packages installed by multiarch
# (libcmocka-dev:arm64, libstdc++6:arm64): the target's loader and C library are those of
# libc6:arm64, in /lib/aarch64-linux-gnu. (Pointing qemu at the cross compiler's copy in
# /usr/aarch64-linux-gnu, -L, would mix two C libraries once multiarch ones are found, and
# thread creation then hangs.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The multiarch pkg-config files of the arm64 packages.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
