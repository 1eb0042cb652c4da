# tools_pi_quantize: Q8_0 and Q4_0 conversions succeed and shrink the file; on a model of rows of
# 256, PowerInfer's Q4_K_M mix and --pure K-quants succeed, the mix (Q6_K output.weight, Q6_K
# attn_v/ffn_down in some layers, Q5_0 predictor) larger than --pure Q4_K_M; the input is never
# overwritten; bad arguments exit with status 2 and one line naming the cause.
# Variables: PI_QUANTIZE, MAKE_MODEL, VOCAB, MODEL (from the fixture), OUT_DIR.
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

# K-quants need rows of 256: a model of that width.
set(wide "${OUT_DIR}/wide.gguf")
execute_process(COMMAND "${MAKE_MODEL}" -o "${wide}" --vocab "${VOCAB}" --n-embd 256 --n-layer 2
                        --n-head 4 --n-ff 512 --seed 3
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pi-make-model (256 wide) failed (${rc}):\n${stderr}")
endif()
foreach(run "Q4_K_M;mix" "q4_k;mix-alias" "Q4_K_M;pure;--pure" "Q6_K;pure6;--pure" "Q2_K;q2"
            "Q4_K_M;left;--leave-output-tensor")
  list(GET run 0 type)
  list(GET run 1 name)
  list(LENGTH run n)
  set(flags "")
  if(n GREATER 2)
    list(GET run 2 flags)
  endif()
  set(out "${OUT_DIR}/wide-${name}.gguf")
  execute_process(COMMAND "${PI_QUANTIZE}" "${wide}" "${out}" ${type} ${flags} -t 2
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0 OR NOT stdout MATCHES "^pi-quantize: wrote [^\n]*wide-${name}\\.gguf \\(${type}")
    message(FATAL_ERROR "pi-quantize ${type} ${flags}: exit ${rc}:\n${stdout}${stderr}")
  endif()
  if(flags STREQUAL "--pure" AND NOT stdout MATCHES ", pure, ")
    message(FATAL_ERROR "pi-quantize ${type} --pure does not say so:\n${stdout}")
  endif()
  file(SIZE "${out}" size_${name})
endforeach()
file(SHA256 "${OUT_DIR}/wide-mix.gguf" mix_hash)
file(SHA256 "${OUT_DIR}/wide-mix-alias.gguf" alias_hash)
if(NOT mix_hash STREQUAL alias_hash)
  message(FATAL_ERROR "Q4_K and Q4_K_M wrote different files")
endif()
if(NOT size_mix GREATER size_pure)
  message(FATAL_ERROR "the Q4_K_M mix (${size_mix} bytes) is not larger than --pure Q4_K_M (${size_pure})")
endif()
# An F32 output.weight (4096 x 256) is larger than its Q6_K.
if(NOT size_left GREATER size_mix)
  message(FATAL_ERROR "--leave-output-tensor (${size_left} bytes) is not larger than the mix (${size_mix})")
endif()
if(NOT size_pure6 GREATER size_pure)
  message(FATAL_ERROR "--pure Q6_K (${size_pure6} bytes) is not larger than --pure Q4_K_M (${size_pure})")
endif()

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
  "MODEL|Q4_K_L|2|PI_ERR_INVALID_ARGUMENT: quantization type 'Q4_K_L'"
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
