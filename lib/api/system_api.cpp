#include <mutex>
#include <string>

#include "api/api_support.hpp"
#include "backend/module_loader.hpp"
#include "platform/parallel.hpp"
#include "platform/system.hpp"
#include "support/log.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace {

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
    // What the CPU backend's NEON levels read too (backends/cpu/arm_features.cpp).
    const pi::platform::arm_extensions arm = pi::platform::arm_cpu_extensions();
    if (arm.dotprod) f += " DOTPROD";
    if (arm.fp16) f += " FP16";
    if (arm.fhm) f += " FHM";
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
           "CPU backend: built in, threads via " + pi::platform::threading_layer +
           "; CPU features:" + cpu_features() + "\n";
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
