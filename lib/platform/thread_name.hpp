#pragma once
// Names for the threads the library starts (the pool's workers, the device worker), so that a
// debugger, `top -H`, perf or a Windows profiler tells them from the host program's threads.
#include <string_view>

namespace pi::platform {

// Names the calling thread; false where the OS cannot (or has no call for it). Linux keeps 15
// bytes of a name, so a longer one is cut there, never inside a UTF-8 character.
bool name_this_thread(std::string_view name) noexcept;

} // namespace pi::platform
