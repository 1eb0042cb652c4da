#pragma once
// Library logging: one process-wide sink that the host may replace (pi_log_set).
#include <string>

namespace pi {

enum class log_level : int { debug = 0, info = 1, warn = 2, error = 3 };

using log_sink = void (*)(log_level level, const char* message, void* user_data);

void set_log_sink(log_sink sink, void* user_data); // nullptr restores stderr (warn and above)
void log(log_level level, const std::string& message);

} // namespace pi
