# The instruction-set objects of the CPU backend (simd_*.cpp) may define no global symbol but
# their table getter: a shared inline or template function compiled there with AVX-512 enabled
# could be the copy the linker keeps for every caller, which would then fault on older CPUs.
# Usage: cmake -DNM=<nm> -DOBJECTS=<objects joined by |> -P check_simd_symbols.cmake
string(REPLACE "|" ";" objects "${OBJECTS}")
set(checked 0)
foreach(object IN LISTS objects)
  get_filename_component(name "${object}" NAME)
  if(NOT name MATCHES "^simd_")
    continue()
  endif()
  execute_process(COMMAND "${NM}" -g --defined-only "${object}"
                  OUTPUT_VARIABLE symbols RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${object}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  foreach(line IN LISTS lines)
    # DW.ref.__gxx_personality_v0 is a hidden data pointer to the C++ personality routine that
    # unwind tables of Debug builds reference: the same bytes in every object, no code.
    if(line STREQUAL "" OR line MATCHES "_kernelsEv$" OR line MATCHES "__(asan|ubsan|sanitizer|odr_asan)"
       OR line MATCHES " DW\\.ref\\.__gxx_personality_v0$")
      continue()
    endif()
    message(FATAL_ERROR "${name} exports a symbol other than its kernel table: ${line}")
  endforeach()
  math(EXPR checked "${checked} + 1")
endforeach()
message(STATUS "${checked} instruction-set object(s) export only their kernel table")
