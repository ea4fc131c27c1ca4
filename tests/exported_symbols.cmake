# SPDX-License-Identifier: Apache-2.0
# cmake -DLIBRARY=libdlsync.so [-DPREFIX=dl_sync_sim_] -P exported_symbols.cmake
# cmake -DARCHIVE=libdlsync.a [-DPREFIX=dl_sync_sim_] -P exported_symbols.cmake
# An archive (a static copy) may give default visibility to nothing but the deleters
# other copies recognize (the core's) or to nothing at all (the simulator's): a copy
# linked into a library or a -rdynamic executable must not interpose on another.
# Fails when the library exports a symbol outside its prefix or an internal one. The core
# library (PREFIX unset: dl_sync_) must not export the simulator's dl_sync_sim_ symbols,
# and must export the deleters other copies of dlsync recognize by name
# (dlsync/tensor_event.h).
# The simulator (PREFIX dl_sync_sim_) also defines pthread_create and pthread_join, which
# make thread creation and join happens-before edges for its race checker (sync/sim/
# thread.c): its shared library exports them (weak), its archive keeps them hidden. Every
# other global symbol of the simulator's archive, hidden or not, is dl_sync_sim_ (API) or
# dl_sync__sim_ (internal).
if(NOT DEFINED PREFIX)
  set(PREFIX dl_sync_)
  set(FORBIDDEN "^dl_sync_sim_")
  set(REQUIRED dl_sync_tensor_event_deleter_v1 dl_sync_legacy_tensor_event_deleter_v1)
  set(INTERPOSED)
elseif(PREFIX STREQUAL "dl_sync_sim_")
  set(INTERPOSED pthread_create pthread_join)
endif()
if(DEFINED ARCHIVE)
  execute_process(COMMAND readelf -sW ${ARCHIVE} OUTPUT_VARIABLE table RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "readelf failed on ${ARCHIVE}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${table}")
  set(visible)
  foreach(line ${lines})
    # Num: Value Size Type Bind Vis Ndx Name
    if(line MATCHES "^ *[0-9]+: +[0-9a-f]+ +[0-9]+ +[A-Z]+ +(GLOBAL|WEAK) +DEFAULT +([0-9A-Z]+) +([^ ]+)$")
      if(NOT CMAKE_MATCH_2 STREQUAL "UND")
        list(APPEND visible ${CMAKE_MATCH_3})
      endif()
    endif()
    if(PREFIX STREQUAL "dl_sync_sim_" AND
       line MATCHES "^ *[0-9]+: +[0-9a-f]+ +[0-9]+ +[A-Z]+ +(GLOBAL|WEAK) +[A-Z]+ +([0-9A-Z]+) +([^ ]+)$")
      set(name ${CMAKE_MATCH_3})
      if(NOT CMAKE_MATCH_2 STREQUAL "UND" AND NOT name MATCHES "^(dl_sync_sim_[a-z]|dl_sync__sim)")
        list(FIND INTERPOSED "${name}" interposed)
        if(interposed LESS 0)
          message(FATAL_ERROR "${ARCHIVE} defines the global symbol ${name} (expected the "
                              "dl_sync_sim_ or dl_sync__sim_ prefix)")
        endif()
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES visible)
  list(SORT visible)
  if(PREFIX STREQUAL "dl_sync_")
    set(allowed dl_sync_legacy_tensor_event_deleter_v1 dl_sync_tensor_event_deleter_v1)
  else()
    set(allowed)
  endif()
  if(NOT "${visible}" STREQUAL "${allowed}")
    message(FATAL_ERROR "${ARCHIVE} gives default visibility to: ${visible} (expected: ${allowed})")
  endif()
  message(STATUS "${ARCHIVE}: default visibility only for: ${allowed}")
  return()
endif()
execute_process(COMMAND nm -D --defined-only ${LIBRARY} OUTPUT_VARIABLE symbols RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
set(count 0)
foreach(line ${lines})
  string(REGEX REPLACE "^.* " "" name "${line}")
  list(FIND INTERPOSED "${name}" interposed)
  if(interposed GREATER_EQUAL 0)
    math(EXPR count "${count} + 1")
    continue()
  endif()
  if(NOT name MATCHES "^${PREFIX}[a-z]" OR name MATCHES "^dl_sync__")
    message(FATAL_ERROR "unexpected exported symbol: ${name} (expected the ${PREFIX} prefix)")
  endif()
  if(DEFINED FORBIDDEN AND name MATCHES "${FORBIDDEN}")
    message(FATAL_ERROR "the core library exports the simulator's ${name}")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no symbol exported by ${LIBRARY}")
endif()
foreach(required ${REQUIRED})
  if(NOT symbols MATCHES " ${required}\n")
    message(FATAL_ERROR "${required} is not exported: other copies of dlsync cannot recognize its tensors")
  endif()
endforeach()
message(STATUS "${count} symbols exported, all public ${PREFIX} API")
