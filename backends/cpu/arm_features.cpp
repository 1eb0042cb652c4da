#include "arm_features.hpp"

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace pi::cpu {

namespace {

#if defined(__APPLE__)
bool sysctl_flag(const char* name) noexcept {
    int32_t value = 0;
    size_t size = sizeof(value);
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

arm_cpu read_features() noexcept {
    arm_cpu f;
#if defined(__linux__)
    const unsigned long hwcap = getauxval(AT_HWCAP);
    f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
    f.fp16 = (hwcap & HWCAP_ASIMDHP) != 0;
#elif defined(__APPLE__)
    f.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    f.fp16 = sysctl_flag("hw.optional.arm.FEAT_FP16");
#endif
    return f;
}

} // namespace

const arm_cpu& arm_features() noexcept {
    static const arm_cpu features = read_features();
    return features;
}

} // namespace pi::cpu
