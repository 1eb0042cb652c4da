# Warnings for every target of the project; sanitizer builds come from the `asan` preset.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
)
set(POWERINFER_SANITIZE "" CACHE STRING "Sanitizers to enable, e.g. address,undefined")
if(POWERINFER_SANITIZE)
  add_compile_options(-fsanitize=${POWERINFER_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${POWERINFER_SANITIZE})
endif()
