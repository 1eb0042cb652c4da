#pragma once

#include <cstdio>

#include "json.hpp"
#include "report.hpp"

namespace pi::bench {

// The --parallel and --chat-turns tables; nothing when no run has them.
void markdown_parallel(const report& r, std::FILE* out);
void markdown_chat_turns(const report& r, std::FILE* out);

// A run's "parallel" (an object, or null) and "chat_turns" (an array) members.
void json_conversation(json_writer& j, const run_result& run);

} // namespace pi::bench
