#pragma once
// What the opaque handles of powerinfer.h hold.
#include <cstring>
#include <memory>
#include <string>

#include "api/api_support.hpp"
#include "engine/context.hpp"
#include "engine/offload.hpp"
#include "model/model.hpp"
#include "sampling/sampler.hpp"
#include "support/error.hpp"

struct pi_model {
    std::unique_ptr<pi::model> impl;
    std::unique_ptr<pi::offload> offloaded; // dense blocks and hot neurons on a device, when one is used
    std::string offload_device;
};

struct pi_context {
    std::unique_ptr<pi::context> impl;
};

struct pi_sampler {
    std::unique_ptr<pi::sampler> impl;
};

namespace pi::api {

// A caller's struct_size: at least the field itself, at most 1 MiB (anything else is garbage).
inline size_t checked_struct_size(size_t size, const char* name) {
    if (size < sizeof(size_t) || size > (size_t(1) << 20))
        fail(status::invalid_argument, name, ".struct_size is ", size, "; set it to sizeof(", name,
             ")");
    return size;
}

// Reads a caller's parameter struct, honouring struct_size: fields the caller's (older) header
// did not have keep their defaults. Rejects a size smaller than the first field.
template <typename T> T read_params(const T* given, T defaults, const char* name) {
    if (!given) return defaults;
    const size_t size = checked_struct_size(given->struct_size, name);
    const size_t n = size < sizeof(T) ? size : sizeof(T);
    std::memcpy(static_cast<void*>(&defaults), given, n);
    defaults.struct_size = sizeof(T);
    return defaults;
}

// Fills the first `size` bytes of a caller's parameter struct with the defaults (zero beyond
// them for a struct newer than this library) and sets its struct_size to `size`.
template <typename T> void fill_defaults(T* out, size_t size, const T& defaults, const char* name) {
    if (!out) fail(status::invalid_argument, "argument 'params' is NULL");
    checked_struct_size(size, name);
    std::memset(static_cast<void*>(out), 0, size);
    std::memcpy(static_cast<void*>(out), &defaults, size < sizeof(T) ? size : sizeof(T));
    out->struct_size = size;
}

// The body of every pi_*_params_init: fill_defaults behind guard().
template <typename T>
pi_status init_params(T* params, size_t size, const T& defaults, const char* name) noexcept {
    return guard([&] {
        fill_defaults(params, size, defaults, name);
        return PI_OK;
    });
}

// Writes an output struct into a caller's, honouring struct_size: a caller built against an
// older header gets the prefix its struct has; its struct_size stays as it set it.
template <typename T> void write_output(T* out, const T& full, const char* name) {
    const size_t size = checked_struct_size(out->struct_size, name);
    const size_t n = size < sizeof(T) ? size : sizeof(T);
    std::memcpy(static_cast<void*>(out), &full, n);
    out->struct_size = size;
}

} // namespace pi::api

namespace pi::api {

// Chooses the offload device named by the params and moves the planned placement onto it.
void attach_offload(pi_model& model, const pi_model_params& params, const char* path);

} // namespace pi::api
