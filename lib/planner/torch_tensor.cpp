// torch.save zip layout (caffe2/serialize/inline_container): every record sits under one folder
// named after the file (or "archive"), which is the first entry's folder; data.pkl is the pickled
// tensor, data/<key> the raw storage, byteorder (newer versions) "little" or "big".
#include "planner/torch_tensor.hpp"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "planner/torch_pickle.hpp"
#include "planner/torch_zip.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"

namespace pi::planner {

namespace {

enum class element { f32, f64, f16, bf16, i64, i32, i16, i8, u8 };

struct dtype {
    const char* storage;
    element type;
    size_t size;
};

constexpr dtype dtypes[] = {
    {"FloatStorage", element::f32, 4}, {"DoubleStorage", element::f64, 8},
    {"HalfStorage", element::f16, 2},  {"BFloat16Storage", element::bf16, 2},
    {"LongStorage", element::i64, 8},  {"IntStorage", element::i32, 4},
    {"ShortStorage", element::i16, 2}, {"CharStorage", element::i8, 1},
    {"ByteStorage", element::u8, 1},   {"BoolStorage", element::u8, 1},
};

uint64_t le(const uint8_t* p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

float convert(const uint8_t* p, element type) {
    switch (type) {
    case element::f32:
        return std::bit_cast<float>(static_cast<uint32_t>(le(p, 4)));
    case element::f64:
        return static_cast<float>(std::bit_cast<double>(le(p, 8)));
    case element::f16:
        return fp16_to_fp32(static_cast<uint16_t>(le(p, 2)));
    case element::bf16:
        return std::bit_cast<float>(static_cast<uint32_t>(le(p, 2) << 16));
    case element::i64:
        return static_cast<float>(static_cast<int64_t>(le(p, 8)));
    case element::i32:
        return static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(le(p, 4))));
    case element::i16:
        return static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(le(p, 2))));
    case element::i8:
        return static_cast<float>(static_cast<int8_t>(p[0]));
    case element::u8:
        return static_cast<float>(p[0]);
    }
    return 0.0f;
}

const zip_entry& record(const zip_view& zip, const std::string& name, const std::string& source) {
    const zip_entry* e = zip.find(name);
    if (!e) fail(status::format, source, ": torch archive has no record '", name, "'");
    return *e;
}

} // namespace

std::vector<float> read_torch_vector(std::span<const uint8_t> file_bytes,
                                     const std::string& source) {
    const zip_view zip(file_bytes, source);
    if (zip.entries().empty()) fail(status::format, source, ": torch archive is empty");
    const std::string& first = zip.entries().front().name;
    const size_t slash = first.find('/');
    if (slash == std::string::npos || slash == 0)
        fail(status::format, source, ": torch archive entry '", first, "' is not in a folder");
    const std::string prefix = first.substr(0, slash + 1);

    if (const zip_entry* order = zip.find(prefix + "byteorder")) {
        const std::span<const uint8_t> b = zip.data(*order);
        const std::string value(b.begin(), b.end());
        if (value != "little")
            fail(status::unsupported, source, ": torch byteorder '", value,
                 "' (only little-endian files are supported)");
    }
    const torch_tensor_ref t =
        read_tensor_pickle(zip.data(record(zip, prefix + "data.pkl", source)), source);

    const dtype* dt = nullptr;
    for (const dtype& d : dtypes)
        if (t.storage_type == d.storage) dt = &d;
    if (!dt) fail(status::unsupported, source, ": tensor storage type ", t.storage_type);
    if (t.size.size() != 1)
        fail(status::unsupported, source, ": tensor has ", t.size.size(),
             " dimensions, expected a 1-D tensor");
    const int64_t n = t.size[0];
    if (n < 0 || t.offset < 0 || t.storage_numel < 0 || (n > 1 && t.stride[0] != 1))
        fail(status::format, source, ": tensor of size ", n, ", offset ", t.offset, ", stride ",
             t.stride[0], " in a storage of ", t.storage_numel,
             " elements is not a contiguous view");
    if (n > t.storage_numel || t.offset > t.storage_numel - n)
        fail(status::format, source, ": tensor [", t.offset, ", +", n, ") lies outside its ",
             t.storage_numel, "-element storage");

    const std::span<const uint8_t> data = zip.data(record(zip, prefix + "data/" + t.key, source));
    if (static_cast<uint64_t>(t.storage_numel) > data.size() / dt->size ||
        data.size() != static_cast<uint64_t>(t.storage_numel) * dt->size)
        fail(status::format, source, ": storage record data/", t.key, " has ", data.size(),
             " bytes, ", t.storage_numel, " elements of ", t.storage_type, " need ",
             static_cast<uint64_t>(t.storage_numel) * dt->size);

    std::vector<float> out(static_cast<size_t>(n));
    const uint8_t* p = data.data() + static_cast<size_t>(t.offset) * dt->size;
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = convert(p + i * dt->size, dt->type);
    return out;
}

std::vector<float> read_torch_vector(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(status::io, path, ": cannot open: ", std::strerror(errno));
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    if (in.bad()) fail(status::io, path, ": read failed");
    return read_torch_vector(bytes, path);
}

} // namespace pi::planner
