#pragma once
// The chat page served at GET /: one self-contained HTML document (no external assets), built
// into the binary from chat_page.html.
#include <string_view>

namespace pi_server {

std::string_view chat_page_html() noexcept;

} // namespace pi_server
