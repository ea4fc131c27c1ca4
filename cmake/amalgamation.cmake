# SPDX-License-Identifier: Apache-2.0
# The one-file distribution: `cmake --build <build> --target dlsync_amalgamation` writes
# dlsync.h, dlsync.c, dlsync_sim.h, dlsync_sim.c and LICENSE into <build>/amalgamation
# (scripts/amalgamate.py; docs/vendoring.md). Not part of the default build.
find_program(DL_SYNC_PYTHON3 NAMES python3)
if(NOT DL_SYNC_PYTHON3)
  return()
endif()
set(DL_SYNC_AMALGAMATION_DIR ${PROJECT_BINARY_DIR}/amalgamation)
file(GLOB_RECURSE _dl_sync_amalgamation_inputs CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/sync/*.c ${PROJECT_SOURCE_DIR}/sync/*.h
     ${PROJECT_SOURCE_DIR}/include/dlsync/*.h)
set(DL_SYNC_AMALGAMATION_FILES)
foreach(name dlsync.h dlsync.c dlsync_sim.h dlsync_sim.c LICENSE)
  list(APPEND DL_SYNC_AMALGAMATION_FILES ${DL_SYNC_AMALGAMATION_DIR}/${name})
endforeach()
add_custom_command(
  OUTPUT ${DL_SYNC_AMALGAMATION_FILES}
  COMMAND ${DL_SYNC_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/amalgamate.py
          --out ${DL_SYNC_AMALGAMATION_DIR}
  DEPENDS ${PROJECT_SOURCE_DIR}/scripts/amalgamate.py ${_dl_sync_amalgamation_inputs}
          ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/sync/CMakeLists.txt
          ${PROJECT_SOURCE_DIR}/sync/sim/CMakeLists.txt
  COMMENT "dlsync one-file distribution in ${DL_SYNC_AMALGAMATION_DIR}"
  VERBATIM)
add_custom_target(dlsync_amalgamation DEPENDS ${DL_SYNC_AMALGAMATION_FILES})
