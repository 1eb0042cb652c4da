#pragma once
// The AArch64 extensions the NEON kernel levels use, read once from the OS: the auxiliary vector's
// HWCAP bits on Linux, the hw.optional.arm sysctls on macOS. NEON itself is part of the base
// architecture. Elsewhere (other OSes) only the base level is used.
#include <cstdint>

namespace pi::cpu {

struct arm_cpu {
    bool dotprod = false; // FEAT_DotProd: sdot, for the neon_dotprod level
    bool fp16 = false;    // FEAT_FP16: half-precision arithmetic (reported, see docs/arm64.md)
};

// The running CPU's extensions, read on first use.
const arm_cpu& arm_features() noexcept;

} // namespace pi::cpu
