// The module door (pib_module.h): what the core calls after dlopen. Turns "no driver"
// and "no device" into reasons the core can show in pi_system_info.
#include "gpu_backend.hpp"
#include "gpu_blas.hpp"
#include "gpu_runtime.hpp"
#include "pib_module.h"

#include <cstdio>

#if !defined(PI_GPU_HIP) && !defined(PI_GPU_SIM)
#include <dlfcn.h>
#endif

#define PI_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

template <class... A> void say(char* why, size_t why_size, const char* fmt, A... args) {
    if (why != nullptr && why_size > 0) std::snprintf(why, why_size, fmt, args...);
}

bool version_ok(uint32_t api_version, char* why, size_t why_size) {
    if (api_version == PIB_API_VERSION) return true;
    say(why, why_size, "the core speaks backend API version %u, this module version %u",
        static_cast<unsigned>(api_version), static_cast<unsigned>(PIB_API_VERSION));
    return false;
}

// The simulation shares HIP's wording; its runtime always has its one device.
#if defined(PI_GPU_HIP) || defined(PI_GPU_SIM)
void explain_no_driver(cudaError_t e, char* why, size_t why_size) {
    say(why, why_size,
        "no usable %s driver (%s; the amdgpu kernel driver, /dev/kfd, is missing or not "
        "accessible)",
        PI_GPU_VENDOR, cudaGetErrorString(e));
}
#else
// The static runtime loads libcuda.so.1 itself: either it is absent, or the driver behind it
// predates the runtime this module was built with.
void explain_no_driver(cudaError_t e, char* why, size_t why_size) {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver == nullptr) {
        say(why, why_size, "no CUDA driver (libcuda.so.1 not found)");
        return;
    }
    dlclose(driver);
    int version = 0;
    static_cast<void>(cudaDriverGetVersion(&version));
    say(why, why_size, "the NVIDIA driver supports CUDA %d.%d, this module needs %d.%d (%s)",
        version / 1000, version % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
        cudaGetErrorString(e));
}
#endif

// Devices present, or a reason naming the missing driver or device.
int count_devices(int32_t* count, char* why, size_t why_size) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    static_cast<void>(cudaGetLastError());
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        say(why, why_size, "no %s device", PI_GPU_VENDOR);
        return PIB_ERR_DEVICE;
    }
    if (e == cudaErrorInsufficientDriver) {
        explain_no_driver(e, why, why_size);
        return PIB_ERR_DEVICE;
    }
    if (e != cudaSuccess) {
        say(why, why_size, "%s is unusable: %s", PI_GPU_VENDOR, cudaGetErrorString(e));
        return PIB_ERR_DEVICE;
    }
    *count = n;
    return PIB_OK;
}

bool index_ok(int32_t device_index, char* why, size_t why_size) {
    int32_t n = 0;
    if (count_devices(&n, why, why_size) != PIB_OK) return false;
    if (device_index >= 0 && device_index < n) return true;
    say(why, why_size, "%s device %d does not exist (%d present)", PI_GPU_VENDOR,
        static_cast<int>(device_index), static_cast<int>(n));
    return false;
}

} // namespace

PI_MODULE_EXPORT uint32_t pib_module_api_version(void) {
    return PIB_API_VERSION;
}

PI_MODULE_EXPORT int pib_module_device_count(uint32_t api_version, int32_t* count, char* why,
                                             size_t why_size) {
    if (count == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *count = 0;
    if (!version_ok(api_version, why, why_size)) return PIB_ERR_UNSUPPORTED;
    return count_devices(count, why, why_size);
}

PI_MODULE_EXPORT int pib_module_describe(uint32_t api_version, int32_t device_index,
                                         pib_module_device* out, char* why, size_t why_size) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = pib_module_device{};
    if (!version_ok(api_version, why, why_size)) return PIB_ERR_UNSUPPORTED;
    if (!index_ok(device_index, why, why_size)) return PIB_ERR_DEVICE;
    cudaDeviceProp prop{};
    size_t free_bytes = 0, total = 0;
    cudaError_t e = cudaGetDeviceProperties(&prop, device_index);
    if (e == cudaSuccess) e = cudaSetDevice(device_index);
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total);
    if (e != cudaSuccess) {
        static_cast<void>(cudaGetLastError());
        say(why, why_size, "%s device %d: %s", PI_GPU_VENDOR, static_cast<int>(device_index),
            cudaGetErrorString(e));
        return PIB_ERR_DEVICE;
    }
    // pi_system_info lists the devices by this name: it also says how prompts are multiplied.
    // Both parts are cut to fit the field (GPU names are far shorter than 160 bytes).
    std::snprintf(out->name, sizeof out->name, "%.160s, prompts: %.84s", prop.name,
                  pi::gpu::gemm_path());
    out->memory_total = total;
    out->memory_free = free_bytes;
    return PIB_OK;
}

PI_MODULE_EXPORT int pib_module_create(uint32_t api_version, int32_t device_index, pib_backend* out,
                                       char* why, size_t why_size) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    out->vt = nullptr;
    out->ctx = nullptr;
    if (!version_ok(api_version, why, why_size)) return PIB_ERR_UNSUPPORTED;
    if (!index_ok(device_index, why, why_size)) return PIB_ERR_DEVICE;
    return pi::gpu::create(device_index, out, why, why_size);
}
