# SPDX-License-Identifier: Apache-2.0
# What the two CUDA suite binaries are built against, read from their symbols:
# - which default stream they launch on: code built for per-thread default streams (nvcc
#   --default-stream per-thread, or CUDA_API_PER_THREAD_DEFAULT_STREAM) calls the _ptsz /
#   _ptds variants of the runtime's entry points;
# - the shared CUDA runtime, not a static copy: libdlsync uses the runtime already loaded in
#   the process, and a static one inside the binary is invisible to it.
# Usage: cmake -DNM=nm -DLEGACY=<binary> -DPER_THREAD=<binary> -P suite_binaries.cmake
foreach(variant LEGACY PER_THREAD)
  execute_process(COMMAND ${NM} -u ${${variant}} OUTPUT_VARIABLE symbols RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} -u ${${variant}} failed (${status})")
  endif()
  set(${variant}_SYMBOLS "${symbols}")
  execute_process(COMMAND ${NM} --defined-only ${${variant}} OUTPUT_VARIABLE defined RESULT_VARIABLE status)
  if(NOT status EQUAL 0 OR defined MATCHES "[ \t]T cudaGetDeviceCount")
    message(FATAL_ERROR "${${variant}} carries its own (static) CUDA runtime: link the shared one")
  endif()
endforeach()
if(NOT PER_THREAD_SYMBOLS MATCHES "LaunchKernel_ptsz")
  message(FATAL_ERROR "${PER_THREAD} launches its kernels without the per-thread entry point "
                      "(no *LaunchKernel_ptsz import): its kernels were built for the legacy default stream")
endif()
if(LEGACY_SYMBOLS MATCHES "_pt(sz|ds)")
  message(FATAL_ERROR "${LEGACY} imports per-thread entry points (_ptsz/_ptds): it is not a legacy build")
endif()
if(NOT LEGACY_SYMBOLS MATCHES "LaunchKernel")
  message(FATAL_ERROR "${LEGACY} imports no kernel launch entry point: cannot tell its default stream")
endif()
message(STATUS "per-thread build launches through *_ptsz, legacy build through the legacy entry "
               "points; both use the shared CUDA runtime")
