# The ABI surface of libpowerinfer.so: its SONAME, and exactly the functions powerinfer.h
# declares, all named pi_*. Run as
#   cmake -DLIBRARY=<libpowerinfer.so> -DHEADER=<powerinfer.h> -DNM=<nm> -DREADELF=<readelf>
#         -P check_exports.cmake

cmake_minimum_required(VERSION 3.25)

# Deliberately spelled out: a new SONAME is an ABI break and must be a conscious change here.
set(expected_soname "libpowerinfer.so.0")
set(required pi_model_load pi_generate pi_decode pi_tokenize)

foreach(var LIBRARY HEADER NM READELF)
  if(NOT ${var})
    message(FATAL_ERROR "check_exports.cmake: -D${var}= is required")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -d ${LIBRARY}
  OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed (${rc})")
endif()
if(NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[([^]\n]*)\\]")
  message(FATAL_ERROR "${LIBRARY} has no SONAME")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL expected_soname)
  message(FATAL_ERROR "SONAME is '${CMAKE_MATCH_1}', expected '${expected_soname}'")
endif()

# POSIX format: "name type value size", one defined dynamic symbol a line.
execute_process(COMMAND ${NM} -D --defined-only -P ${LIBRARY}
  OUTPUT_VARIABLE symbols_text RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${symbols_text}")
set(exported "")
set(errors "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^([^ @]+)(@[^ ]*)? ([A-Za-z]) ")
    continue()
  endif()
  set(name ${CMAKE_MATCH_1})
  set(type ${CMAKE_MATCH_3})
  if(type STREQUAL "A") # version nodes, not code or data
    continue()
  endif()
  if(NOT name MATCHES "^pi_")
    string(APPEND errors "  exported symbol without the pi_ prefix: ${name} (${type})\n")
  endif()
  list(APPEND exported ${name})
endforeach()

file(READ ${HEADER} header_text)
string(REGEX MATCHALL "PI_API[^(;]*\\(" declarations "${header_text}")
set(declared "")
foreach(declaration IN LISTS declarations)
  if(declaration MATCHES "(pi_[a-z0-9_]+) *\\($")
    list(APPEND declared ${CMAKE_MATCH_1})
  endif()
endforeach()
if(NOT declared)
  message(FATAL_ERROR "found no PI_API declaration in ${HEADER}")
endif()
# The header's inline pi_*_default_params() keep 0.1's exported functions of those names.
string(REGEX MATCHALL "static inline [^(;]*\\(" inline_definitions "${header_text}")
foreach(definition IN LISTS inline_definitions)
  if(definition MATCHES "(pi_[a-z0-9_]+) *\\($")
    list(APPEND declared ${CMAKE_MATCH_1})
  endif()
endforeach()

set(expected ${required} ${declared})
list(REMOVE_DUPLICATES expected)
foreach(name IN LISTS expected)
  if(NOT name IN_LIST exported)
    string(APPEND errors "  declared in powerinfer.h but not exported: ${name}\n")
  endif()
endforeach()
foreach(name IN LISTS exported)
  if(name MATCHES "^pi_" AND NOT name IN_LIST declared)
    string(APPEND errors "  exported but not declared in powerinfer.h: ${name}\n")
  endif()
endforeach()

if(errors)
  message(FATAL_ERROR "ABI check of ${LIBRARY} failed:\n${errors}")
endif()
list(LENGTH exported n_exported)
message(STATUS "${LIBRARY}: SONAME ${expected_soname}, ${n_exported} pi_* symbols, all declared")
