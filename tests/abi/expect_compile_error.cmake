# cmake -DCC=... -DSOURCE=... -DINCLUDES="a;b" -DEXPECT=regex -P expect_compile_error.cmake
# Passes when compiling SOURCE fails with a message matching EXPECT.
set(args)
foreach(dir ${INCLUDES})
  list(APPEND args -I${dir})
endforeach()
execute_process(COMMAND ${CC} -std=c11 -fsyntax-only ${args} ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with: ${EXPECT}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE} failed without the expected message '${EXPECT}':\n${err}")
endif()
message(STATUS "failed as expected: ${EXPECT}")
