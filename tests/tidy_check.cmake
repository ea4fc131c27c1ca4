# SPDX-License-Identifier: Apache-2.0
# cmake -DCLANG_TIDY=clang-tidy -DSOURCE_DIR=<repository> -DBUILD_DIR=<build> -P tidy_check.cmake
# The library's sources have no finding under .clang-tidy (bug-prone checks, the static
# analyzer, a function-length limit), over the build's compile_commands.json. Checks differ
# between clang-tidy versions: the tree is kept clean with clang-tidy 14 (Debian 12's).
execute_process(COMMAND ${CLANG_TIDY} --version OUTPUT_VARIABLE version)
if(NOT version MATCHES "version 14\\.")
  message("SKIP: ${CLANG_TIDY} is not clang-tidy 14: ${version}")
  return()
endif()
file(GLOB sources ${SOURCE_DIR}/sync/*.c ${SOURCE_DIR}/sync/backends/*.c)
execute_process(COMMAND ${CLANG_TIDY} --quiet -p ${BUILD_DIR} ${sources} RESULT_VARIABLE result
                OUTPUT_VARIABLE findings ERROR_VARIABLE log)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "clang-tidy findings (fix them, or NOLINT with the reason):\n${findings}")
endif()
list(LENGTH sources count)
message("${count} library sources without a clang-tidy finding")
