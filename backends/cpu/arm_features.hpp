#pragma once
// The AArch64 extensions the NEON kernel levels use, read once from the OS through lib/platform
// (platform::arm_cpu_extensions: HWCAP bits on Linux, hw.optional.arm sysctls on macOS). NEON
// itself is part of the base architecture. Elsewhere (other OSes) only the base level is used.
#include "platform/system.hpp"

namespace pi::cpu {

// dotprod: FEAT_DotProd (sdot), for the neon_dotprod level; fp16: FEAT_FP16, reported only (see
// docs/arm64.md).
using arm_cpu = platform::arm_extensions;

// The running CPU's extensions, read on first use.
const arm_cpu& arm_features() noexcept;

} // namespace pi::cpu
