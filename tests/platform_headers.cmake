# SPDX-License-Identifier: Apache-2.0
# cmake -DSOURCE_DIR=<repository> -P platform_headers.cmake
# The library's files include C11's standard headers and its own, nothing of an operating
# system: that is the platform files' (sync/platform.h, platform_posix.c,
# platform_windows.c), so that a new system is one file and MSVC builds the rest as is.
set(standard assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h
    locale.h math.h setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h
    stdint.h stdio.h stdlib.h stdnoreturn.h string.h tgmath.h threads.h time.h uchar.h wchar.h
    wctype.h)
# The simulated device's header is of a library built on pthreads (sync/sim/), not of the
# core library.
set(platform_files sync/platform.h sync/platform_posix.c sync/platform_windows.c
    include/dlsync/sim.h)
file(GLOB sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/sync/*.[ch] ${SOURCE_DIR}/sync/backends/*.[ch]
     ${SOURCE_DIR}/include/dlsync/*.h)
set(failures)
set(checked 0)
foreach(source ${sources})
  list(FIND platform_files ${source} is_platform)
  if(NOT is_platform EQUAL -1)
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS ${SOURCE_DIR}/${source} includes REGEX "^[ \t]*#[ \t]*include[ \t]*<")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>.*" "\\1" header "${line}")
    list(FIND standard ${header} known)
    if(known EQUAL -1 AND NOT header MATCHES "^(dlsync|dlpack)/")
      list(APPEND failures "${source}: <${header}>")
    endif()
  endforeach()
endforeach()
if(checked LESS 20)
  message(FATAL_ERROR "only ${checked} files found under ${SOURCE_DIR}/sync: wrong SOURCE_DIR?")
endif()
if(failures)
  string(REPLACE ";" "\n  " listed "${failures}")
  message(FATAL_ERROR "operating system headers outside the platform files:\n  ${listed}")
endif()
message("${checked} files include only C11's headers and dlsync's")
