#include "formats/torch_tensor.hpp"

#include <bit>

#include "formats/little_endian.hpp"
#include "formats/mapped_file.hpp"
#include "formats/torch_archive.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"

namespace pi::formats {

namespace {

float convert(const uint8_t* p, torch_element type) {
    switch (type) {
    case torch_element::f32:
        return std::bit_cast<float>(static_cast<uint32_t>(read_le(p, 4)));
    case torch_element::f64:
        return static_cast<float>(std::bit_cast<double>(read_le(p, 8)));
    case torch_element::f16:
        return fp16_to_fp32(static_cast<uint16_t>(read_le(p, 2)));
    case torch_element::bf16:
        return std::bit_cast<float>(static_cast<uint32_t>(read_le(p, 2) << 16));
    case torch_element::i64:
        return static_cast<float>(static_cast<int64_t>(read_le(p, 8)));
    case torch_element::i32:
        return static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(read_le(p, 4))));
    case torch_element::i16:
        return static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(read_le(p, 2))));
    case torch_element::i8:
        return static_cast<float>(static_cast<int8_t>(p[0]));
    case torch_element::u8:
        return static_cast<float>(p[0]);
    }
    return 0.0f;
}

} // namespace

std::vector<float> read_torch_vector(std::span<const uint8_t> file_bytes,
                                     const std::string& source) {
    const torch_archive archive(file_bytes, source);
    const torch_tensor_data t = archive.locate(read_tensor_pickle(archive.pickle(), source));
    if (t.shape.size() != 1)
        fail(status::unsupported, source, ": tensor has ", t.shape.size(),
             " dimensions, expected a 1-D tensor");
    // An expanded tensor (stride 0) would be allocated at its full size from one element of
    // the file: only elements the storage holds are read into memory.
    if (static_cast<uint64_t>(t.shape[0]) > t.span)
        fail(status::format, source, ": the tensor repeats its ", t.span, " stored elements as ",
             t.shape[0], " (stride 0); an activation vector stores each of its elements");
    std::vector<float> out(static_cast<size_t>(t.shape[0]));
    const uint8_t* first = file_bytes.data() + t.offset;
    const uint64_t step = static_cast<uint64_t>(t.stride[0]) * t.dtype->size;
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = convert(first + i * step, t.dtype->element);
    return out;
}

std::vector<float> read_torch_vector(const std::string& path) {
    const mapped_file file(path);
    return read_torch_vector(file.bytes(), path);
}

} // namespace pi::formats
