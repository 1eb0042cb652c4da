#include "formats/torch_dtype.hpp"

namespace pi::formats {

namespace {

constexpr torch_dtype dtypes[] = {
    {"FloatStorage", "F32", torch_element::f32, 4},
    {"DoubleStorage", "F64", torch_element::f64, 8},
    {"HalfStorage", "F16", torch_element::f16, 2},
    {"BFloat16Storage", "BF16", torch_element::bf16, 2},
    {"LongStorage", "I64", torch_element::i64, 8},
    {"IntStorage", "I32", torch_element::i32, 4},
    {"ShortStorage", "I16", torch_element::i16, 2},
    {"CharStorage", "I8", torch_element::i8, 1},
    {"ByteStorage", "U8", torch_element::u8, 1},
    {"BoolStorage", "BOOL", torch_element::u8, 1},
};

} // namespace

const torch_dtype* find_torch_dtype(std::string_view storage) noexcept {
    for (const torch_dtype& d : dtypes)
        if (d.storage == storage) return &d;
    return nullptr;
}

} // namespace pi::formats
