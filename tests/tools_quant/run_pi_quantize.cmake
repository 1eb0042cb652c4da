# tools_pi_quantize: Q8_0 and Q4_0 conversions succeed and shrink the file; the input is never
# overwritten; bad arguments exit with status 2 and one line naming the cause.
# Variables: PI_QUANTIZE, MODEL (from the fixture), OUT_DIR.
file(REMOVE_RECURSE "${OUT_DIR}")
file(MAKE_DIRECTORY "${OUT_DIR}")
file(SIZE "${MODEL}" in_size)
file(SHA256 "${MODEL}" in_hash)

foreach(type Q8_0 Q4_0)
  set(out "${OUT_DIR}/tiny-${type}.gguf")
  execute_process(COMMAND "${PI_QUANTIZE}" "${MODEL}" "${out}" ${type} --threads 2
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pi-quantize ${type} failed (${rc}):\n${stdout}${stderr}")
  endif()
  if(NOT stdout MATCHES "^pi-quantize: wrote [^\n]*tiny-${type}\\.gguf \\(${type}, ")
    message(FATAL_ERROR "pi-quantize ${type}: unexpected output:\n${stdout}")
  endif()
  if(NOT EXISTS "${out}")
    message(FATAL_ERROR "pi-quantize ${type} reported success but wrote no ${out}")
  endif()
  file(SIZE "${out}" out_size)
  # F32 -> Q8_0 is about 34/128 of the weight bytes, Q4_0 about 18/128.
  math(EXPR limit "${in_size} * 2 / 5")
  if(NOT out_size LESS limit)
    message(FATAL_ERROR "${type} output is ${out_size} bytes, expected < ${limit} (input ${in_size})")
  endif()
endforeach()

file(GLOB leftovers "${OUT_DIR}/*.tmp.*")
if(leftovers)
  message(FATAL_ERROR "temporary files left behind: ${leftovers}")
endif()

# Refuses to overwrite its input, directly or through a symbolic link.
file(CREATE_LINK "${MODEL}" "${OUT_DIR}/link.gguf" SYMBOLIC)
foreach(target "${MODEL}" "${OUT_DIR}/link.gguf")
  execute_process(COMMAND "${PI_QUANTIZE}" "${MODEL}" "${target}" Q4_0
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 2 OR NOT stderr MATCHES "^pi-quantize: PI_ERR_INVALID_ARGUMENT: [^\n]*same file\\)\n$")
    message(FATAL_ERROR "pi-quantize onto its input ${target}: exit ${rc}, expected 2 and one line:\n${stderr}")
  endif()
endforeach()
file(SHA256 "${MODEL}" after_hash)
if(NOT after_hash STREQUAL in_hash)
  message(FATAL_ERROR "the input model changed")
endif()

# Requantizing, an unknown type and a missing input fail with one line.
set(cases
  "tiny-Q4_0.gguf|Q8_0|1|PI_ERR_UNSUPPORTED: tensor '[^']+' is already Q4_0"
  "MODEL|Q4_K|2|PI_ERR_INVALID_ARGUMENT: quantization type 'Q4_K'"
  "missing.gguf|Q4_0|1|PI_ERR_IO: [^\n]*missing\\.gguf")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 in)
  list(GET parts 1 type)
  list(GET parts 2 want_rc)
  list(GET parts 3 want_err)
  if(in STREQUAL "MODEL")
    set(in "${MODEL}")
  else()
    set(in "${OUT_DIR}/${in}")
  endif()
  execute_process(COMMAND "${PI_QUANTIZE}" "${in}" "${OUT_DIR}/never.gguf" ${type}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL want_rc OR NOT stderr MATCHES "^pi-quantize: ${want_err}[^\n]*\n$")
    message(FATAL_ERROR "pi-quantize ${in} ${type}: exit ${rc} (want ${want_rc}):\n${stderr}")
  endif()
endforeach()
if(EXISTS "${OUT_DIR}/never.gguf")
  message(FATAL_ERROR "a failed run left ${OUT_DIR}/never.gguf")
endif()

execute_process(COMMAND "${PI_QUANTIZE}" "${MODEL}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "pi-quantize with missing arguments exited ${rc}, expected 2")
endif()
