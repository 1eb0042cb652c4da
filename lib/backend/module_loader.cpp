#include "backend/module_loader.hpp"

#include "backend/device.hpp"
#include "pib_module.h"
#include "platform/files.hpp"
#include "platform/library.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

namespace pi {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t why_size = 512;

struct module_api {
    std::string path;
    pib_module_device_count_fn device_count = nullptr;
    pib_module_describe_fn describe = nullptr;
    pib_module_create_fn create = nullptr;
};

// Modules loaded so far, by name. Never unloaded: GPU runtimes do not survive dlclose well,
// and backends created from them may outlive any caller's interest in the module.
struct registry {
    std::mutex mutex;
    std::map<std::string, module_api> loaded;
};

registry& modules() {
    static registry r;
    return r;
}

std::string file_name(const std::string& name) {
    return platform::library_file_name("powerinfer-" + name);
}

std::string display_name(const std::string& name) {
    if (name == "cuda") return "CUDA";
    if (name == "hip") return "HIP";
    return name;
}

// The folder of the binary this function was linked into.
std::string core_dir() {
    const std::string binary = platform::binary_path_of(reinterpret_cast<const void*>(&core_dir));
    if (binary.empty()) return {};
    return platform::utf8_string(platform::utf8_path(binary).parent_path());
}

std::string first_existing(const std::string& file) {
    for (const std::string& dir : backend_module_dirs()) {
        std::error_code ec;
        const fs::path p = platform::utf8_path(dir) / platform::utf8_path(file);
        if (fs::is_regular_file(p, ec)) return platform::utf8_string(p);
    }
    return {};
}

template <class Fn> Fn symbol(void* handle, const char* name) {
    return reinterpret_cast<Fn>(platform::library_symbol(handle, name));
}

// Opens the module at `path` and checks its API version; the reason on failure.
bool open_module(const std::string& path, module_api& api, std::string& reason) {
    std::string why;
    void* h = platform::library_open(path, why);
    if (h == nullptr) {
        reason = concat("cannot load ", path, ": ", why);
        return false;
    }
    const auto version = symbol<pib_module_api_version_fn>(h, PIB_MODULE_API_VERSION_SYMBOL);
    api.device_count = symbol<pib_module_device_count_fn>(h, PIB_MODULE_DEVICE_COUNT_SYMBOL);
    api.describe = symbol<pib_module_describe_fn>(h, PIB_MODULE_DESCRIBE_SYMBOL);
    api.create = symbol<pib_module_create_fn>(h, PIB_MODULE_CREATE_SYMBOL);
    if (version == nullptr || api.device_count == nullptr || api.describe == nullptr ||
        api.create == nullptr) {
        reason =
            concat(path, " is not a libpowerinfer backend module (missing pib_module_* symbols)");
        platform::library_close(h);
        return false;
    }
    if (const uint32_t v = version(); v != PIB_API_VERSION) {
        reason =
            concat(path, " was built for backend API version ", v, ", this libpowerinfer uses ",
                   PIB_API_VERSION, "; rebuild the module with this libpowerinfer");
        platform::library_close(h);
        return false;
    }
    return true;
}

// The module's entry points, loading it on first use; empty `reason` on success.
module_api load(const std::string& name, std::string& path, std::string& reason) {
    registry& r = modules();
    std::lock_guard lock(r.mutex);
    if (const auto it = r.loaded.find(name); it != r.loaded.end()) {
        path = it->second.path;
        return it->second;
    }
    path = first_existing(file_name(name));
    if (path.empty()) {
        std::string dirs;
        for (const std::string& d : backend_module_dirs())
            dirs += (dirs.empty() ? "" : ", ") + d;
        reason =
            concat(file_name(name), " not found (searched: ", dirs.empty() ? "nothing" : dirs, ")");
        return {};
    }
    module_api api;
    api.path = path;
    if (!open_module(path, api, reason)) return {};
    r.loaded.emplace(name, api);
    return api;
}

std::string why_text(const std::array<char, why_size>& why, int status) {
    return why[0] != '\0' ? std::string(why.data()) : concat("status ", status);
}

std::string gib(std::size_t bytes) {
    const double g = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
    const long tenths = static_cast<long>(g * 10.0 + 0.5);
    return concat(tenths / 10, ".", tenths % 10, " GiB");
}

} // namespace

const std::vector<std::string>& backend_module_names() {
    static const std::vector<std::string> names{"cuda", "hip"};
    return names;
}

std::vector<std::string> backend_module_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("POWERINFER_BACKEND_PATH")) {
        std::string list = env;
        std::size_t start = 0;
        while (start <= list.size()) {
            const std::size_t end =
                std::min(list.find(platform::path_list_separator(), start), list.size());
            if (end > start) dirs.push_back(list.substr(start, end - start));
            start = end + 1;
        }
    }
    if (std::string dir = core_dir(); !dir.empty()) dirs.push_back(std::move(dir));
    return dirs;
}

module_status probe_backend_module(const std::string& name) {
    module_status s;
    s.name = name;
    const module_api api = load(name, s.path, s.reason);
    if (api.device_count == nullptr) return s;
    std::array<char, why_size> why{};
    int32_t count = 0;
    if (const int st = api.device_count(PIB_API_VERSION, &count, why.data(), why.size());
        st != PIB_OK) {
        s.reason = why_text(why, st);
        return s;
    }
    for (int32_t i = 0; i < count; ++i) {
        pib_module_device d{};
        why[0] = '\0';
        if (const int st = api.describe(PIB_API_VERSION, i, &d, why.data(), why.size());
            st != PIB_OK) {
            s.reason = why_text(why, st);
            s.devices.clear();
            return s;
        }
        d.name[sizeof d.name - 1] = '\0';
        s.devices.push_back(module_device{d.name, d.memory_total, d.memory_free});
    }
    s.loaded = true;
    return s;
}

std::vector<module_status> probe_backend_modules() {
    std::vector<module_status> all;
    for (const std::string& name : backend_module_names())
        all.push_back(probe_backend_module(name));
    return all;
}

std::string describe(const module_status& s) {
    std::string line = display_name(s.name) + " backend: ";
    if (!s.loaded) return line + "unavailable: " + s.reason;
    line += concat(platform::utf8_string(platform::utf8_path(s.path).filename()), " (",
                   platform::utf8_string(platform::utf8_path(s.path).parent_path()),
                   "): ", s.devices.size(), s.devices.size() == 1 ? " device:" : " devices:");
    for (std::size_t i = 0; i < s.devices.size(); ++i)
        line += concat(i == 0 ? " " : "; ", s.devices[i].name, " (", gib(s.devices[i].memory_total),
                       ")");
    return line;
}

device device::from_module(const std::string& name, int device_index) {
    std::string path, reason;
    const module_api api = load(name, path, reason);
    if (api.create == nullptr)
        fail(status::unsupported, display_name(name), " backend unavailable: ", reason);
    std::array<char, why_size> why{};
    device d;
    if (const int st = api.create(PIB_API_VERSION, device_index, &d.be_, why.data(), why.size());
        st != PIB_OK)
        fail(st == PIB_ERR_OUT_OF_MEMORY ? status::out_of_memory : status::unsupported,
             display_name(name), " backend unavailable: ", why_text(why, st));
    if (d.be_.vt == nullptr || d.be_.vt->api_version != PIB_API_VERSION) {
        const uint32_t v = d.be_.vt != nullptr ? d.be_.vt->api_version : 0;
        if (d.be_.vt != nullptr) d.be_.vt->destroy(d.be_.ctx);
        d.be_ = pib_backend{nullptr, nullptr};
        fail(status::unsupported, path, " returned a backend of API version ", v, ", expected ",
             PIB_API_VERSION);
    }
    return d;
}

} // namespace pi
