# POWERINFER_FUZZ: libFuzzer targets (tests/fuzz, docs/fuzzing.md). libFuzzer ships with Clang
# only, and a finding is only worth its report when the library runs under ASan and UBSan, so both
# are required rather than assumed. Every target of the project gets SanitizerCoverage
# (fuzzer-no-link): without it the fuzzer would see no coverage of the parsers inside the library.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "POWERINFER_FUZZ needs libFuzzer, which comes with Clang: configure with "
                      "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "
                      "(scripts/fuzz.sh does)")
endif()
if(NOT POWERINFER_SANITIZE MATCHES "address" OR NOT POWERINFER_SANITIZE MATCHES "undefined")
  message(FATAL_ERROR "POWERINFER_FUZZ needs the library built with ASan and UBSan: configure "
                      "with -DPOWERINFER_SANITIZE=address,undefined (scripts/fuzz.sh does)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link)
