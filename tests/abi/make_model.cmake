# Test fixture: writes a tiny synthetic model with pi-make-model. Run as
#   cmake -DMAKE_MODEL=<pi-make-model> -DVOCAB=<vocabulary-only GGUF> -DOUT=<model.gguf>
#         "-DARGS=<further flags>" ["-DEMULATOR=<runner|args>"] -P make_model.cmake
# EMULATOR ('|'-separated): what runs a cross-compiled pi-make-model (CMAKE_CROSSCOMPILING_EMULATOR).
# The vocabulary is the repository's own (tests/data/relu-llama-kjv.vocab.gguf, docs/fixture.md).
cmake_minimum_required(VERSION 3.25)

file(REMOVE ${OUT})
separate_arguments(args UNIX_COMMAND "${ARGS}")
string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(COMMAND ${emulator} ${MAKE_MODEL} -o ${OUT} --vocab ${VOCAB} ${args}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pi-make-model failed (${rc})")
endif()
if(NOT EXISTS ${OUT})
  message(FATAL_ERROR "pi-make-model succeeded but wrote no ${OUT}")
endif()
