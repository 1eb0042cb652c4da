# tools_pi_perplexity: the llama.cpp-style output, a JSON summary with a finite positive PPL over
# exactly the scored positions, the same result whatever the sub-batch size, and a clear error
# for a text shorter than two windows.
# Variables: PI_PERPLEXITY, MODEL (from the fixture), TEXT, OUT_DIR.
file(REMOVE_RECURSE "${OUT_DIR}")
file(MAKE_DIRECTORY "${OUT_DIR}")

function(run_ppl out_var)
  execute_process(COMMAND "${PI_PERPLEXITY}" -m "${MODEL}" -f "${TEXT}" -c 32 --chunks 2 -t 1 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pi-perplexity ${ARGN} failed (${rc}):\n${stdout}${stderr}")
  endif()
  set(${out_var} "${stdout}" PARENT_SCOPE)
endfunction()

# A decimal like 15.0348816 in units of 1e-6, so that CMake's integer math can compare it.
function(micro_units out_var value)
  if(NOT value MATCHES "^([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "expected a plain positive decimal, got '${value}'")
  endif()
  set(whole "${CMAKE_MATCH_1}")
  set(frac "${CMAKE_MATCH_2}000000")
  string(SUBSTRING "${frac}" 0 6 frac)
  string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
  math(EXPR v "${whole} * 1000000 + ${frac}")
  set(${out_var} ${v} PARENT_SCOPE)
endfunction()

run_ppl(text_out)
if(NOT text_out MATCHES "^\\[1\\][0-9]+\\.[0-9]+,\\[2\\][0-9]+\\.[0-9]+,\nFinal estimate: PPL = [0-9]+\\.[0-9]+ \\+/- [0-9]+\\.[0-9]+\n$")
  message(FATAL_ERROR "unexpected pi-perplexity output:\n${text_out}")
endif()

run_ppl(json_out --json)
string(JSON ppl GET "${json_out}" ppl)
string(JSON ppl_stderr GET "${json_out}" ppl_stderr)
string(JSON nll GET "${json_out}" nll_mean)
string(JSON n_chunks GET "${json_out}" n_chunks)
string(JSON n_scored GET "${json_out}" n_scored)
string(JSON n_ctx GET "${json_out}" n_ctx)
string(JSON n_chunk_values LENGTH "${json_out}" chunk_ppl)
if(NOT ppl MATCHES "^[0-9]+(\\.[0-9]+)?(e\\+[0-9]+)?$" OR ppl MATCHES "^0(\\.0*)?$")
  message(FATAL_ERROR "PPL is not a finite positive number: '${ppl}'\n${json_out}")
endif()
if(NOT ppl_stderr MATCHES "^[0-9]+(\\.[0-9]+)?(e\\+[0-9]+)?$")
  message(FATAL_ERROR "PPL error is not a finite number: '${ppl_stderr}'")
endif()
# Windows of 32 score positions 16..30: 15 tokens each.
if(NOT n_ctx EQUAL 32 OR NOT n_chunks EQUAL 2 OR NOT n_chunk_values EQUAL 2 OR NOT n_scored EQUAL 30)
  message(FATAL_ERROR "unexpected counts in the summary:\n${json_out}")
endif()

# Sub-batches of 5 tokens with explicit positions give the same NLL (to 1e-5).
run_ppl(small_batches --json -b 5)
string(JSON nll_b5 GET "${small_batches}" nll_mean)
micro_units(a "${nll}")
micro_units(b "${nll_b5}")
math(EXPR diff "${a} - ${b}")
if(diff GREATER 10 OR diff LESS -10)
  message(FATAL_ERROR "mean NLL ${nll} with -b 32 but ${nll_b5} with -b 5")
endif()

# Too short: 2 * n_ctx tokens are needed.
file(WRITE "${OUT_DIR}/short.txt" "Only a few words here.")
execute_process(COMMAND "${PI_PERPLEXITY}" -m "${MODEL}" -f "${OUT_DIR}/short.txt" -c 32
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 1 OR NOT stderr MATCHES "at least 64 \\(2 \\* n_ctx\\) are needed for -c 32")
  message(FATAL_ERROR "short text: exit ${rc}, expected 1 with a message:\n${stderr}")
endif()
execute_process(COMMAND "${PI_PERPLEXITY}" -m "${MODEL}" -f "${TEXT}" -c 2
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "-c 2 exited ${rc}, expected 2")
endif()
