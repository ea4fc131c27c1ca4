# SPDX-License-Identifier: Apache-2.0
# cmake -DCC=... [-DLANG=c|cpp] -DSOURCE=... -DINCLUDES="a;b" -DEXPECT=regex
#       [-DEXPECT_ERRORS=n] -P expect_compile_error.cmake
# Passes when compiling SOURCE fails with a message matching EXPECT (and, with
# EXPECT_ERRORS, with exactly that many errors).
set(args)
foreach(dir ${INCLUDES})
  list(APPEND args -I${dir})
endforeach()
if(LANG STREQUAL "cpp")
  list(APPEND args -x c++ -std=c++17)
else()
  list(APPEND args -std=c11)
endif()
execute_process(COMMAND ${CC} ${args} -fsyntax-only ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with: ${EXPECT}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE} failed without the expected message '${EXPECT}':\n${err}")
endif()
if(DEFINED EXPECT_ERRORS)
  string(REGEX MATCHALL "(^|\n)[^\n]*: (fatal )?error: " errors "${err}")
  list(LENGTH errors count)
  if(NOT count EQUAL EXPECT_ERRORS)
    message(FATAL_ERROR "${SOURCE}: ${count} errors, expected ${EXPECT_ERRORS}:\n${err}")
  endif()
endif()
message(STATUS "failed as expected: ${EXPECT}")
