# One run of the powerinfer CLI. Run as
#   cmake -DPOWERINFER=<powerinfer> -DMODEL=<model.gguf> "-DARGS=<more|args>" [-DINPUT=<stdin file>]
#         [-DEXPECT_RC=<status>] ["-DEXPECT_STDOUT=<regex>"] ["-DEXPECT_STDERR=<regex>|<regex>"]
#         [-DEXPECT_JSON_AFTER=<prompt>] [-DMODEL_POSITIONAL=1] -P run_powerinfer.cmake
# ARGS and EXPECT_STDERR are separated by '|' (a ';' would split them on the way here). The run
# must exit with EXPECT_RC (default 0); stdout must match EXPECT_STDOUT and stderr every regex of
# EXPECT_STDERR. EXPECT_JSON_AFTER: stdout is that prompt, then the generated text, which must be
# a JSON document, then a newline.
cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" args "${ARGS}")
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
set(input_args "")
if(DEFINED INPUT)
  set(input_args INPUT_FILE ${INPUT})
endif()

# MODEL_POSITIONAL: the program takes the model as its first argument, not through -m.
set(model_args -m ${MODEL})
if(MODEL_POSITIONAL)
  set(model_args ${MODEL})
endif()
execute_process(
  COMMAND ${POWERINFER} ${model_args} ${args}
  ${input_args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)

message("stdout:\n${stdout}\nstderr:\n${stderr}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "powerinfer exited with ${rc}, expected ${EXPECT_RC}")
endif()
if(DEFINED EXPECT_STDOUT AND NOT stdout MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}'")
endif()
if(DEFINED EXPECT_STDERR)
  string(REPLACE "|" ";" stderr_patterns "${EXPECT_STDERR}")
  foreach(pattern IN LISTS stderr_patterns)
    if(NOT stderr MATCHES "${pattern}")
      message(FATAL_ERROR "stderr does not match '${pattern}'")
    endif()
  endforeach()
endif()
if(EXPECT_JSON_AFTER)
  string(LENGTH "${EXPECT_JSON_AFTER}" skip)
  string(SUBSTRING "${stdout}" ${skip} -1 generated)
  string(REGEX REPLACE "\n$" "" generated "${generated}")
  string(JSON type ERROR_VARIABLE json_error TYPE "${generated}")
  if(json_error)
    message(FATAL_ERROR "the output is not JSON: ${json_error}")
  endif()
endif()
