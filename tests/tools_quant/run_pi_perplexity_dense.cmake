# tools_pi_perplexity_dense: --dense scores a sparse file with its predictor and with every
# neuron, printing both side by side and both in the JSON summary. With an exact predictor
# (MODEL) the two perplexities agree; with a noisy one (NOISY_MODEL) they differ; a dense file
# (DENSE_MODEL) is scored once, with a note.
# Variables: PI_PERPLEXITY, MODEL, NOISY_MODEL, DENSE_MODEL (from the fixtures), TEXT.
function(run_ppl out_var err_var model)
  execute_process(COMMAND "${PI_PERPLEXITY}" -m "${model}" -f "${TEXT}" -c 32 --chunks 2 -t 1 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pi-perplexity -m ${model} ${ARGN} failed (${rc}):\n${stdout}${stderr}")
  endif()
  set(${out_var} "${stdout}" PARENT_SCOPE)
  set(${err_var} "${stderr}" PARENT_SCOPE)
endfunction()

set(number "[0-9]+\\.[0-9]+")

# A mean NLL cut to four decimals, for comparisons to 1e-4.
function(four_decimals out_var value)
  if(NOT value MATCHES "^[0-9]+\\.[0-9][0-9][0-9][0-9]")
    message(FATAL_ERROR "mean NLL '${value}' is not a plain decimal")
  endif()
  set(${out_var} "${CMAKE_MATCH_0}" PARENT_SCOPE)
endfunction()
run_ppl(side_by_side err "${MODEL}" --dense)
if(NOT side_by_side MATCHES "^\\[1\\] sparse (${number}), dense (${number})\n\\[2\\] sparse ${number}, dense ${number}\nFinal estimate: sparse PPL = (${number}) \\+/- ${number}, dense PPL = (${number}) \\+/- ${number}, ratio (${number})\n$")
  message(FATAL_ERROR "unexpected pi-perplexity --dense output:\n${side_by_side}")
endif()
set(first_sparse "${CMAKE_MATCH_1}")
set(first_dense "${CMAKE_MATCH_2}")
set(ratio "${CMAKE_MATCH_5}")
# An exact predictor computes the same neurons: the same perplexity to the printed digits.
if(NOT first_sparse STREQUAL first_dense OR NOT ratio STREQUAL "1.0000")
  message(FATAL_ERROR "exact predictor: sparse and dense perplexities differ:\n${side_by_side}")
endif()

run_ppl(json err "${MODEL}" --dense --json)
string(JSON sparse_nll GET "${json}" nll_mean)
string(JSON dense_nll GET "${json}" dense nll_mean)
string(JSON dense_ppl GET "${json}" dense ppl)
string(JSON dense_scored GET "${json}" dense n_scored)
string(JSON dense_chunks LENGTH "${json}" dense chunk_ppl)
string(JSON json_ratio GET "${json}" ppl_ratio)
string(JSON sparse_inference GET "${json}" sparse_inference)
if(NOT dense_scored EQUAL 30 OR NOT dense_chunks EQUAL 2 OR NOT sparse_inference STREQUAL "ON")
  message(FATAL_ERROR "unexpected dense summary:\n${json}")
endif()
# Mean NLLs (about 15) agree to 1e-4: the relative PPL difference is below 1e-4 too.
four_decimals(sparse_4 "${sparse_nll}")
four_decimals(dense_4 "${dense_nll}")
if(NOT sparse_4 STREQUAL dense_4 OR NOT json_ratio MATCHES "^(1|0\\.9999[0-9]*|1\\.0000[0-9]*)$")
  message(FATAL_ERROR "exact predictor: NLL ${sparse_nll} sparse, ${dense_nll} dense, ratio ${json_ratio}")
endif()

# A noisy predictor misses neurons: the two runs are really different.
run_ppl(noisy err "${NOISY_MODEL}" --dense --json)
string(JSON noisy_nll GET "${noisy}" nll_mean)
string(JSON noisy_dense_nll GET "${noisy}" dense nll_mean)
if(noisy_nll STREQUAL noisy_dense_nll)
  message(FATAL_ERROR "noisy predictor: sparse and dense NLL are both ${noisy_nll}:\n${noisy}")
endif()
# Dense scoring does not depend on the predictor: the noisy file's dense NLL is the exact one's.
four_decimals(noisy_dense_4 "${noisy_dense_nll}")
if(NOT noisy_dense_4 STREQUAL dense_4)
  message(FATAL_ERROR "dense NLL ${noisy_dense_nll} with a noisy predictor, ${dense_nll} with an exact one")
endif()

# A dense file has no predictor: one run, the plain format, and a note saying so.
run_ppl(plain err "${DENSE_MODEL}" --dense)
if(NOT plain MATCHES "^\\[1\\]${number},\\[2\\]${number},\nFinal estimate: PPL = ${number} \\+/- ${number}\n$")
  message(FATAL_ERROR "unexpected output for a dense file:\n${plain}")
endif()
if(NOT err MATCHES "is a dense file \\(no predictor\\)")
  message(FATAL_ERROR "no note for --dense on a dense file:\n${err}")
endif()
run_ppl(plain_json err "${DENSE_MODEL}" --dense --json)
string(JSON has_dense ERROR_VARIABLE no_dense GET "${plain_json}" dense)
string(JSON dense_file_sparse GET "${plain_json}" sparse_inference)
if(NOT no_dense OR NOT dense_file_sparse STREQUAL "OFF")
  message(FATAL_ERROR "a dense file's summary has a second run or claims sparse inference:\n${plain_json}")
endif()
