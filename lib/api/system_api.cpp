#include <mutex>
#include <string>
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include "api/api_support.hpp"
#include "backend/module_loader.hpp"
#include "support/log.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace {

#if defined(__aarch64__) && defined(__APPLE__)
bool sysctl_flag(const char* name) {
    int32_t value = 0;
    size_t size = sizeof(value);
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

std::string cpu_features() {
    std::string f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) f += " AVX2";
    if (__builtin_cpu_supports("fma")) f += " FMA";
    // CPUID leaf 1, ECX bit 29: Clang before 16 has no "f16c" for __builtin_cpu_supports.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0) f += " F16C";
    if (__builtin_cpu_supports("avx512f")) f += " AVX512F";
#elif defined(__aarch64__)
    f += " NEON";
#if defined(__linux__)
    // The HWCAP bits the CPU backend's NEON levels read (backends/cpu/arm_features.cpp).
    const unsigned long hwcap = getauxval(AT_HWCAP);
    if ((hwcap & HWCAP_ASIMDDP) != 0) f += " DOTPROD";
    if ((hwcap & HWCAP_ASIMDHP) != 0) f += " FP16";
#elif defined(__APPLE__)
    if (sysctl_flag("hw.optional.arm.FEAT_DotProd")) f += " DOTPROD";
    if (sysctl_flag("hw.optional.arm.FEAT_FP16")) f += " FP16";
#endif
#endif
    return f.empty() ? " (none detected)" : f;
}

struct log_bridge {
    pi_log_callback fn = nullptr;
    void* user_data = nullptr;
};
log_bridge bridge;
std::mutex bridge_mutex;

void forward_log(pi::log_level level, const char* message, void*) {
    // pi::log holds its own lock while calling us, so the bridge cannot change mid-call.
    bridge.fn(static_cast<pi_log_level>(level), message, bridge.user_data);
}

} // namespace

extern "C" {

const char* pi_system_info(void) {
    static std::mutex m;
    static std::string info;
    std::lock_guard lock(m);
    info = std::string("libpowerinfer ") + pi_version() + "\n" +
           "CPU backend: built in, threads via oneTBB; CPU features:" + cpu_features() + "\n";
    for (const pi::module_status& s : pi::probe_backend_modules())
        info += pi::describe(s) + "\n";
    return info.c_str();
}

void pi_log_set(pi_log_callback callback, void* user_data) {
    std::lock_guard lock(bridge_mutex);
    if (!callback) {
        pi::set_log_sink(nullptr, nullptr);
        return;
    }
    pi::set_log_sink(nullptr, nullptr); // detach before changing the bridge the sink reads
    bridge.fn = callback;
    bridge.user_data = user_data;
    pi::set_log_sink(&forward_log, nullptr);
}

} // extern "C"
