# One pi-soak run. Run as
#   cmake -DPI_SOAK=<pi-soak> -DARGS=<a|b|c> -DEXPECT_RC=<n> [-DEXPECT_STDERR=<regex>]
#         [-DEXPECT_STDOUT=<regex>] [-DEMULATOR=<a|b>] -P run_pi_soak.cmake
# The exit status must be EXPECT_RC exactly (0 passed, 1 a check failed, 2 bad arguments) and the
# streams must match their regexes.
cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(COMMAND ${emulator} ${PI_SOAK} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
message("${stdout}${stderr}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "pi-soak exited with ${rc}, expected ${EXPECT_RC}")
endif()
if(DEFINED EXPECT_STDERR AND NOT stderr MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "pi-soak's stderr does not match '${EXPECT_STDERR}'")
endif()
if(DEFINED EXPECT_STDOUT AND NOT stdout MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "pi-soak's stdout does not match '${EXPECT_STDOUT}'")
endif()
