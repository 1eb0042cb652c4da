# One quick pi-bench run on a tiny model. Run as
#   cmake -DPI_BENCH=<pi-bench> -DMODEL=<model.gguf> [-DEXTRA=<more;args>]
#         [-DEXPECT_ERROR=<regex>] -P run_pi_bench.cmake
# Without EXPECT_ERROR pi-bench must succeed and its --json report must hold, for every mode
# run, a pp and a tg test with positive tokens/s, and bytes per token for tg; both modes of the
# sparse tiny model must have run. With EXPECT_ERROR pi-bench must exit with a non-zero status
# and a stderr matching the regex.
cmake_minimum_required(VERSION 3.25)

execute_process(
  COMMAND ${PI_BENCH} -m ${MODEL} -p 8 -n 4 -r 1 --warmup 0 --no-bandwidth --json ${EXTRA}
  RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE stderr)

if(DEFINED EXPECT_ERROR)
  message("${stderr}")
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "pi-bench did not exit cleanly: ${rc}")
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "pi-bench succeeded, but it should have failed")
  elseif(NOT stderr MATCHES "${EXPECT_ERROR}")
    message(FATAL_ERROR "pi-bench's error does not match '${EXPECT_ERROR}'")
  endif()
  return()
endif()

if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pi-bench failed (${rc}): ${stderr}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/pi_bench_json.cmake)

string(JSON n_runs ERROR_VARIABLE json_error LENGTH "${json}" runs)
if(json_error)
  message(FATAL_ERROR "pi-bench --json is not the expected JSON: ${json_error}\n${json}")
endif()
set(modes "")
math(EXPR last_run "${n_runs} - 1")
foreach(r RANGE ${last_run})
  json_get(mode runs ${r} mode)
  list(APPEND modes ${mode})
  string(JSON n_tests LENGTH "${json}" runs ${r} tests)
  set(seen "")
  math(EXPR last_test "${n_tests} - 1")
  foreach(t RANGE ${last_test})
    json_get(test runs ${r} tests ${t} test)
    json_get(speed runs ${r} tests ${t} tokens_per_second median)
    if(NOT speed GREATER 0)
      message(FATAL_ERROR "${mode} ${test}: tokens/s is ${speed}, expected > 0")
    endif()
    if(test STREQUAL "tg")
      json_get(bytes runs ${r} tests ${t} bytes_per_token)
      if(NOT bytes GREATER 0)
        message(FATAL_ERROR "${mode} tg: bytes per token is ${bytes}, expected > 0")
      endif()
    endif()
    list(APPEND seen ${test})
  endforeach()
  foreach(expected pp tg)
    if(NOT expected IN_LIST seen)
      message(FATAL_ERROR "mode ${mode} has no ${expected} test in:\n${json}")
    endif()
  endforeach()
endforeach()
foreach(expected sparse dense)
  if(NOT expected IN_LIST modes)
    message(FATAL_ERROR "no ${expected} run in:\n${json}")
  endif()
endforeach()
