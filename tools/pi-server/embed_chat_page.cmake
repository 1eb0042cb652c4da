# cmake -DIN=chat_page.html -DOUT=chat_page.cpp -P embed_chat_page.cmake
# Writes the page as a C++ string: raw literals of at most 8000 bytes each (compilers limit one
# literal's length), so the page must be ASCII (a cut may not split a character) and must not
# contain the literals' closing delimiter.
file(READ "${IN}" page)
string(REGEX MATCH "[^\t\n\r -~]" non_ascii "${page}")
if(non_ascii)
  message(FATAL_ERROR "${IN}: the page must be ASCII (write other characters as HTML or JS escapes)")
endif()
string(FIND "${page}" ")page\"" delimiter_at)
if(NOT delimiter_at EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-literal delimiter )page\"")
endif()
string(LENGTH "${page}" size)
set(literals "")
set(at 0)
while(at LESS size)
  string(SUBSTRING "${page}" ${at} 8000 piece)
  string(APPEND literals "    R\"page(${piece})page\"\n")
  math(EXPR at "${at} + 8000")
endwhile()
file(WRITE "${OUT}.tmp" "// Generated from chat_page.html by embed_chat_page.cmake: do not edit.
#include \"chat_page.hpp\"

namespace pi_server {

std::string_view chat_page_html() noexcept {
    static constexpr std::string_view page =
${literals}    ;
    return page;
}

} // namespace pi_server
")
file(RENAME "${OUT}.tmp" "${OUT}")
