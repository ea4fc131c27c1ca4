# SPDX-License-Identifier: Apache-2.0
# cmake "-DLIBRARIES=a.so;b.so" "-DENTRIES=entry_a;entry_b" "-DDELETERS=1;0"
#       -P plugin_exports.cmake
# Each library was built from dlsync's static archives plus one source file that exports
# one entry point. What nm -D --defined-only lists must be that entry and, where the
# library records tensor events (DELETERS 1: the archive's tensor code is linked in), the
# two versioned tensor-event deleters (dlsync/tensor_event.h) that other copies of dlsync
# recognize by name; nothing else: any other dl_sync_ symbol lets the library's copy
# interpose on another copy in the process, or another on it.
set(deleters dl_sync_legacy_tensor_event_deleter_v1 dl_sync_tensor_event_deleter_v1)
# What the linker and the C runtime put in every shared object's dynamic symbol table.
set(linker_symbols _init _fini _edata _end __bss_start)
list(LENGTH LIBRARIES count)
math(EXPR last "${count} - 1")
set(failures)
foreach(i RANGE ${last})
  list(GET LIBRARIES ${i} library)
  list(GET ENTRIES ${i} entry)
  list(GET DELETERS ${i} with_deleters)
  execute_process(COMMAND nm -D --defined-only ${library} OUTPUT_VARIABLE table
                  RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "nm -D --defined-only failed on ${library}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${table}")
  set(exported)
  foreach(line ${lines})
    string(REGEX REPLACE "^.* " "" name "${line}")
    list(FIND linker_symbols "${name}" linker_symbol)
    if(linker_symbol EQUAL -1)
      list(APPEND exported ${name})
    endif()
  endforeach()
  list(SORT exported)
  set(expected ${entry})
  if(with_deleters)
    list(APPEND expected ${deleters})
  endif()
  list(SORT expected)
  if("${exported}" STREQUAL "${expected}")
    message(STATUS "${library}: exports ${expected}")
  else()
    set(extra ${exported})
    list(REMOVE_ITEM extra ${expected})
    set(missing ${expected})
    if(exported)
      list(REMOVE_ITEM missing ${exported})
    endif()
    list(LENGTH extra extra_count)
    list(SUBLIST extra 0 8 some)
    if(some)
      string(JOIN ", " some ${some} "...")
    endif()
    string(JOIN ", " missing ${missing})
    list(APPEND failures "${library}: ${extra_count} other exports (${some}); missing: [${missing}]")
  endif()
endforeach()
if(failures)
  string(JOIN "\n  " failures ${failures})
  message(FATAL_ERROR "libraries built from the static archives export more than their entry "
                      "and the deleters (or lack them):\n  ${failures}")
endif()
