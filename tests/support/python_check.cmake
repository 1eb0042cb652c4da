# Runs a test whose samples are written by one of our programs and checked by a Python script
# (with gguf-py as the independent side). Skipped without a suitable Python, except under CI=true.
# Variables: WRITER, PYTHON (empty when no interpreter with gguf was found), SCRIPT, OUT_DIR,
# SCRIPT_ARGS (the script's arguments; default: OUT_DIR).
if(NOT PYTHON)
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "no python with gguf under CI: set POWERINFER_TEST_PYTHON or create .venv")
  endif()
  message("SKIPPED: no python with gguf (set POWERINFER_TEST_PYTHON or create .venv)")
  return()
endif()
if(NOT SCRIPT_ARGS)
  set(SCRIPT_ARGS "${OUT_DIR}")
endif()
file(REMOVE_RECURSE "${OUT_DIR}")
file(MAKE_DIRECTORY "${OUT_DIR}")
execute_process(COMMAND "${WRITER}" "${OUT_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${WRITER} failed: ${rc}")
endif()
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" ${SCRIPT_ARGS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} failed: ${rc}")
endif()
