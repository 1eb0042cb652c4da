# The same greedy tokens on every architecture and CPU kernel level: the powerinfer CLI's output
# for a fixed prompt, greedy decoding, against the x86-64 build's (tests/data/greedy/). Run as
#   cmake -DPOWERINFER=<powerinfer> -DMODEL=<model.gguf> -DEXPECT=<golden.txt>
#         ["-DEMULATOR=<runner|args>"] -P greedy_tokens.cmake
# EMULATOR ('|'-separated) runs a cross-compiled CLI (CMAKE_CROSSCOMPILING_EMULATOR). With
# -DUPDATE=1 the output is written to EXPECT instead (on x86-64 only: the golden is its output).
# 20 tokens: on the Q4_0 fixture the x86 levels agree that far (AVX2 parts from AVX-512 and the
# scalar kernels after about 24), so the golden holds at every level.
cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(
  COMMAND ${emulator} ${POWERINFER} -m ${MODEL} -p "In the beginning God created" -n 20
          --temp 0 -t 2 -s 1
  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "powerinfer exited with ${rc}:\n${stderr}")
endif()
if(UPDATE)
  file(WRITE ${EXPECT} "${stdout}")
  return()
endif()
file(READ ${EXPECT} want)
if(NOT stdout STREQUAL want)
  message(FATAL_ERROR "greedy output differs from ${EXPECT}:\ngot:\n${stdout}\nwant:\n${want}")
endif()
message("same greedy output as ${EXPECT}:\n${stdout}")
