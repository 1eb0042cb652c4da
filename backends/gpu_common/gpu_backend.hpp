#pragma once
// The GPU backend instance, for the module entry points (gpu_module.cu).
#include "pib_backend.h"

#include <cstddef>
#include <cstdint>

namespace pi::gpu {

// A backend on device `device_index`; on failure a reason goes into `why`.
int create(int32_t device_index, pib_backend* out, char* why, std::size_t why_size);

} // namespace pi::gpu
