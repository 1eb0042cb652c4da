// The GGUF reader on arbitrary bytes: gguf::file::open, then every typed getter on every key and
// a read of each tensor's first and last byte, so a bad offset or size that open() let through
// shows up as a fault. pi::error is the reader's answer to a bad file; anything else escapes and
// libFuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "gguf/gguf.hpp"
#include "support/error.hpp"

namespace {

template <typename Get> void try_get(Get&& get) {
    try {
        (void)get();
    } catch (const pi::error&) {
    }
}

void read_every_key(const pi::gguf::file& f) {
    for (const auto& entry : f.metadata()) {
        const std::string& key = entry.first; // a named copy: Clang 14 cannot capture a binding
        try_get([&] { return f.get_u32(key); });
        try_get([&] { return f.get_u64(key, 0); });
        try_get([&] { return f.get_i32(key, 0); });
        try_get([&] { return f.get_f32(key); });
        try_get([&] { return f.get_bool(key, false); });
        try_get([&] { return f.get_string(key); });
        try_get([&] { return f.get_string_array(key); });
        try_get([&] { return f.get_f32_array(key); });
        try_get([&] { return f.get_i32_array(key); });
    }
}

uint8_t touch_tensor_data(const pi::gguf::file& f) {
    uint8_t sum = 0;
    for (const pi::gguf::tensor_info& t : f.tensors()) {
        if (f.find_tensor(t.name) == nullptr) __builtin_trap(); // every tensor is found by name
        if (t.n_bytes == 0) continue;
        sum ^= t.data[0];
        sum ^= t.data[t.n_bytes - 1];
    }
    return sum;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = pi::fuzz::write_input("input.gguf", data, size);
    try {
        const auto f = pi::gguf::file::open(path);
        read_every_key(*f);
        volatile uint8_t sink = touch_tensor_data(*f);
        (void)sink;
        pi::fuzz::note_accepted();
    } catch (const pi::error&) {
    }
    return 0;
}
