# SPDX-License-Identifier: Apache-2.0
# cmake -DCC=gcc -DSOURCE=program.c -DINCLUDE=dir "-DARCHIVES=libdlsync_sim.a;libdlsync.a"
#       -DLIBS=-lpthread;-ldl -DWORK=dir -P static_link.cmake
# The simulator's archive finds the C library's pthread_create at run time, which a fully
# static executable cannot: linking one must fail, and the linker's message must name why.
# The control: the same program links dynamically, and a -static link of a program without
# the simulator works (else the machine has no static C library: skipped).
function(link output)
  execute_process(COMMAND ${CC} -I${INCLUDE} ${SOURCE} ${ARGN} -o ${WORK}/${output}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(result ${result} PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
endfunction()
file(MAKE_DIRECTORY ${WORK})

link(plain -DWITHOUT_SIMULATOR -static ${LIBS})
if(NOT result EQUAL 0)
  message("SKIP: no static C library to link a -static program with:\n${out}")
  return()
endif()
link(dynamic ${ARCHIVES} ${LIBS})
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the simulator's archive does not link into a dynamic program:\n${out}")
endif()
link(static -static ${ARCHIVES} ${LIBS})
if(result EQUAL 0)
  message(FATAL_ERROR "a fully static program linked the simulator's archive (it would abort "
                      "at its first pthread_create)")
endif()
if(NOT out MATCHES "dl_sync_sim_static_library_needs_a_dynamically_linked_program")
  message(FATAL_ERROR "the -static link failed without naming why:\n${out}")
endif()
message("refused as expected:\n${out}")
