# SPDX-License-Identifier: Apache-2.0
# cmake -DCLANG_FORMAT=clang-format -DSOURCE_DIR=<repository> -P format_check.cmake
# Every C, C++ and CUDA file is as .clang-format lays it out. The tree is formatted with
# clang-format 14 (Debian 12's); another major version lays some constructs out otherwise,
# so the check is skipped there.
execute_process(COMMAND ${CLANG_FORMAT} --version OUTPUT_VARIABLE version)
if(NOT version MATCHES "version 14\\.")
  message("SKIP: ${CLANG_FORMAT} is not clang-format 14: ${version}")
  return()
endif()
set(files)
foreach(folder include sync tests samples bench python)
  file(GLOB_RECURSE found ${SOURCE_DIR}/${folder}/*.c ${SOURCE_DIR}/${folder}/*.h
       ${SOURCE_DIR}/${folder}/*.cpp ${SOURCE_DIR}/${folder}/*.cu)
  list(APPEND files ${found})
endforeach()
list(FILTER files EXCLUDE REGEX "/(build|fuzz/corpus)/")
list(LENGTH files count)
if(count LESS 100)
  message(FATAL_ERROR "only ${count} files found under ${SOURCE_DIR}: wrong SOURCE_DIR?")
endif()
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${files} RESULT_VARIABLE result
                ERROR_VARIABLE drift)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "files drift from .clang-format (clang-format -i them):\n${drift}")
endif()
message("${count} files as .clang-format lays them out")
