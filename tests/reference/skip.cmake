# Reports a reference test as skipped (passing), or as failed when CI=true.
if("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "FAILED: ${REASON} (CI=true)")
endif()
message("SKIPPED: ${REASON}")
