#pragma once
// The element types of torch storages: the storage classes a torch.save pickle names
// (torch.FloatStorage, ...), with the safetensors spelling of each type and its size.
#include <cstddef>
#include <string_view>

namespace pi::formats {

enum class torch_element { f32, f64, f16, bf16, i64, i32, i16, i8, u8 };

struct torch_dtype {
    std::string_view storage; // the class name in module torch, e.g. "HalfStorage"
    std::string_view name;    // e.g. "F16", as safetensors spells it
    torch_element element;
    size_t size; // bytes per element
};

// nullptr for a class that is not one of the ten storages read.
const torch_dtype* find_torch_dtype(std::string_view storage) noexcept;

} // namespace pi::formats
