# The backends' include path is enforced by CMake (backends/CMakeLists.txt): with the include
# folders a backend is built with, the backend interface and lib/quant compile and the core's
# other headers are not found. The folders come from the build, so the check follows any change
# to them.
#
#   cmake -DCXX=compiler -DNAME=backend "-DINCLUDES=dir|dir|..." -DPROBE=probe_include.cpp
#         -P check_backend_include_path.cmake
string(REPLACE "|" ";" _dirs "${INCLUDES}")
set(_flags "")
foreach(_dir IN LISTS _dirs)
  list(APPEND _flags "-I${_dir}")
endforeach()

function(probe header expect_found)
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only ${_flags} "-DPI_PROBE_HEADER=\"${header}\"" ${PROBE}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(FIND "${out}" "${header}" named)
  if(expect_found AND NOT rc EQUAL 0)
    message(SEND_ERROR "${NAME}: ${header} should compile with the backend's include path:\n${out}")
  elseif(NOT expect_found AND rc EQUAL 0)
    message(SEND_ERROR "${NAME}: ${header} compiled with the backend's include path; it must not be found")
  elseif(NOT expect_found AND (named EQUAL -1 OR NOT out MATCHES "No such file|not found"))
    message(SEND_ERROR "${NAME}: ${header} failed for another reason than not being found:\n${out}")
  elseif(expect_found)
    message(STATUS "${NAME}: ${header} compiles")
  else()
    message(STATUS "${NAME}: ${header} is not found")
  endif()
endfunction()

foreach(_header pib_backend.h pib_module.h pib_tensor_extent.h pib_builtin.h quant/types.hpp quant/blocks.hpp)
  probe(${_header} TRUE)
endforeach()
foreach(_header support/error.hpp engine/context.hpp backend/device.hpp model/arch.hpp)
  probe(${_header} FALSE)
endforeach()
