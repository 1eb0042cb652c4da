# Runs a program on a model made by a fixture. Run as
#   cmake -DPROGRAM=<exe> -DMODEL=<model.gguf> [-DEXPECT_ERROR=<regex>] -P run_program.cmake
# Without EXPECT_ERROR the program must succeed; with EXPECT_ERROR it must fail and print a
# message matching the regex on stderr.
cmake_minimum_required(VERSION 3.25)

execute_process(COMMAND ${PROGRAM} ${MODEL}
  RESULT_VARIABLE rc ERROR_VARIABLE stderr)
message("${stderr}")
if(NOT DEFINED EXPECT_ERROR)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${MODEL} failed (${rc})")
  endif()
elseif(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${PROGRAM} ${MODEL} did not exit cleanly: ${rc}")
elseif(rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} ${MODEL} succeeded, but it should have failed")
elseif(NOT stderr MATCHES "${EXPECT_ERROR}")
  message(FATAL_ERROR "the error message does not match '${EXPECT_ERROR}'")
endif()
