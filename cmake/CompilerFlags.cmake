# Warnings for every target of the project; sanitizer builds come from the `asan` and `tsan`
# presets (docs/sanitizers.md).
if(MSVC)
  # UTF-8 sources and execution character set; the standard's conformance mode.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:/W4;/utf-8;/permissive->")
else()
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
  )
endif()
if(MINGW)
  # mingw-w64's own C99 printf family: msvcrt's knows neither %zu nor %lld, which the messages use.
  add_compile_definitions(__USE_MINGW_ANSI_STDIO=1)
endif()
set(POWERINFER_SANITIZE "" CACHE STRING "Sanitizers to enable, e.g. address,undefined or thread")
if(POWERINFER_SANITIZE)
  # The compilers refuse ThreadSanitizer next to AddressSanitizer or LeakSanitizer; say so at
  # configure time rather than on the first compile.
  if(POWERINFER_SANITIZE MATCHES "(^|,)thread(,|$)" AND POWERINFER_SANITIZE MATCHES "(^|,)(address|leak)(,|$)")
    message(FATAL_ERROR "POWERINFER_SANITIZE=${POWERINFER_SANITIZE}: thread excludes address and leak")
  endif()
  add_compile_options(-fsanitize=${POWERINFER_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${POWERINFER_SANITIZE})
endif()
