# Which default stream a GPU suite binary launches on, read from the CUDA runtime entry
# points it imports: code built for per-thread default streams (nvcc --default-stream
# per-thread, or CUDA_API_PER_THREAD_DEFAULT_STREAM) calls the _ptsz / _ptds variants.
# Usage: cmake -DNM=nm -DLEGACY=<binary> -DPER_THREAD=<binary> -P default_stream_symbols.cmake
foreach(variant LEGACY PER_THREAD)
  execute_process(COMMAND ${NM} -u ${${variant}} OUTPUT_VARIABLE symbols RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} -u ${${variant}} failed (${status})")
  endif()
  set(${variant}_SYMBOLS "${symbols}")
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
message(STATUS "per-thread build launches through *_ptsz; legacy build through the legacy entry points")
