# pi-bench's --parallel and --chat-turns on a tiny model. Run as
#   cmake -DPI_BENCH=<pi-bench> -DMODEL=<model.gguf> -P run_pi_bench_conversation.cmake
# The --json report of each run must hold a parallel test of 3 sequences with positive aggregate
# and single-sequence tokens/s, and a 3-turn chat whose turns 2 and 3 found tokens in the cache
# and decoded fewer prompt tokens than the transcript holds.
cmake_minimum_required(VERSION 3.25)

execute_process(
  COMMAND ${PI_BENCH} -m ${MODEL} -p 8 -n 4 -r 1 --warmup 0 --no-bandwidth --json --modes sparse
    --parallel 3 --chat-turns 3
  RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pi-bench failed (${rc}): ${stderr}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/pi_bench_json.cmake)

json_get(n_sequences runs 0 parallel n_sequences)
json_get(aggregate runs 0 parallel aggregate_tokens_per_second median)
json_get(single runs 0 parallel single_tokens_per_second median)
json_get(ratio runs 0 parallel ratio)
if(NOT n_sequences EQUAL 3 OR NOT aggregate GREATER 0 OR NOT single GREATER 0 OR NOT ratio GREATER 0)
  message(FATAL_ERROR "parallel: ${n_sequences} sequences, aggregate ${aggregate} t/s, single "
    "${single} t/s, ratio ${ratio}: expected 3 and positive numbers\n${json}")
endif()

string(JSON n_turns LENGTH "${json}" runs 0 chat_turns)
if(NOT n_turns EQUAL 3)
  message(FATAL_ERROR "chat_turns holds ${n_turns} turns, expected 3\n${json}")
endif()
foreach(t 1 2)
  json_get(prompt runs 0 chat_turns ${t} prompt_tokens)
  json_get(cached runs 0 chat_turns ${t} cached_tokens)
  json_get(new runs 0 chat_turns ${t} new_tokens)
  json_get(ms runs 0 chat_turns ${t} prompt_ms median)
  if(NOT cached GREATER 0 OR NOT new LESS prompt OR ms LESS 0)
    message(FATAL_ERROR "chat turn ${t}: ${cached} cached and ${new} new of ${prompt} prompt "
      "tokens in ${ms} ms: expected cached tokens\n${json}")
  endif()
endforeach()
