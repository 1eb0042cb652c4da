#pragma once
// Finds, loads and checks the backend modules (libpowerinfer-cuda.so, libpowerinfer-hip.so),
// and says why one is absent or unusable. Modules are looked for in each folder of the
// environment variable POWERINFER_BACKEND_PATH (':'-separated), then in the folder of the
// binary that holds the core (libpowerinfer.so, or a program that links the core statically).
// A loaded module stays loaded for the life of the process.
#include <cstddef>
#include <string>
#include <vector>

namespace pi {

struct module_device {
    std::string name; // e.g. "NVIDIA H200"
    std::size_t memory_total = 0;
    std::size_t memory_free = 0;
};

struct module_status {
    std::string name;    // "cuda" or "hip"
    std::string path;    // the file found, empty when there is none
    bool loaded = false; // loaded, same backend API version, at least one device
    std::string reason;  // why not, when !loaded
    std::vector<module_device> devices;
};

// The modules the core knows, in the order it prefers them.
const std::vector<std::string>& backend_module_names();

// The folders searched, in order.
std::vector<std::string> backend_module_dirs();

// The state of one module; `name` is one of backend_module_names().
module_status probe_backend_module(const std::string& name);

// probe_backend_module for every known module.
std::vector<module_status> probe_backend_modules();

// One line for pi_system_info, e.g. "CUDA backend: libpowerinfer-cuda.so (/usr/lib): 1 device:
// NVIDIA H200 (140.4 GiB)" or "HIP backend: unavailable: no HIP device".
std::string describe(const module_status& s);

} // namespace pi
