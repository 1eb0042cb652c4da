# Test fixture: writes a tiny synthetic model with pi-make-model. Run as
#   cmake -DMAKE_MODEL=<pi-make-model> -DDATA_DIR=<default data dir> -DVOCAB=<vocab file name>
#         -DOUT=<model.gguf> "-DARGS=<further flags>" -P make_model.cmake
# The vocabulary comes from the shared test data (env PI_TEST_DATA overrides DATA_DIR). Where it
# is absent the test reports itself skipped, except under CI=true, where that is a failure.
cmake_minimum_required(VERSION 3.25)

file(REMOVE ${OUT})
if(DEFINED ENV{PI_TEST_DATA} AND NOT "$ENV{PI_TEST_DATA}" STREQUAL "")
  set(DATA_DIR "$ENV{PI_TEST_DATA}")
endif()
set(vocab "${DATA_DIR}/${VOCAB}")
if(NOT EXISTS "${vocab}")
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "shared test data missing under CI: ${vocab}")
  endif()
  message("SKIPPED: shared test data not found: ${vocab}")
  return()
endif()

separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${MAKE_MODEL} -o ${OUT} --vocab ${vocab} ${args}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pi-make-model failed (${rc})")
endif()
if(NOT EXISTS ${OUT})
  message(FATAL_ERROR "pi-make-model succeeded but wrote no ${OUT}")
endif()
