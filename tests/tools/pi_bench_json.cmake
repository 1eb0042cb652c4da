# json_get(<out> <path...>): one value of pi-bench's --json report held in ${json}; a missing
# path fails the test and shows the report.
macro(json_get out)
  string(JSON ${out} ERROR_VARIABLE json_error GET "${json}" ${ARGN})
  if(json_error)
    message(FATAL_ERROR "pi-bench --json: ${json_error}\n${json}")
  endif()
endmacro()
