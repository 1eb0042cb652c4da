// GGUF reader: maps the file read-only and parses it with every count, length and offset
// checked against the bytes that remain before it is used.
#include "gguf/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "formats/mapped_file.hpp"
#include "gguf/wire.hpp"
#include "support/error.hpp"

namespace pi::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields straight into host integers");

namespace {

struct parsed {
    bool sparse = false;
    uint32_t version = 0;
    uint64_t alignment = wire::default_alignment;
    uint64_t data_offset = 0;
    std::vector<std::pair<std::string, value>> kv;
    std::vector<tensor_info> tensors;
};

// Smallest encodings, used to bound counts by the bytes left before anything is reserved.
constexpr uint64_t min_kv_bytes = 8 + 4 + 1; // key length, type, u8 value
constexpr uint64_t min_tensor_info_bytes =
    8 + 4 + 8 + 4 + 8; // name length, n_dims, ne0, type, offset

// Parsed metadata is held widened (gguf.hpp: every array element is a variant of about 40
// bytes), so a file of small arrays could ask for 40 times its size. The parser adds up what
// it is about to allocate and refuses a file whose metadata would take more than this: 5 times
// the largest vocabularies known (256k tokens with their scores and types, or 150k tokens with
// as many BPE merges, take 20 to 45 MiB).
constexpr uint64_t max_metadata_memory = uint64_t(128) << 20;
// A key or tensor name's entry in the duplicate checks and the tensor index, about.
constexpr uint64_t index_entry_bytes = 2 * (sizeof(std::string) + 4 * sizeof(void*));

// Names come from the file: cap what goes into a message.
std::string quoted(std::string_view name) {
    constexpr size_t max = 120;
    if (name.size() <= max) return concat("'", name, "'");
    return concat("'", name.substr(0, max), "...' (", name.size(), " bytes)");
}

class parser {
  public:
    parser(std::span<const uint8_t> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

    parsed run() {
        parsed out;
        read_header(out);
        const uint64_t n_tensors = read<uint64_t>("n_tensors");
        const uint64_t n_kv = read<uint64_t>("n_kv");
        check_counts(n_tensors, n_kv);
        read_metadata(out, n_kv);
        read_tensor_infos(out, n_tensors);
        place_tensors(out);
        return out;
    }

  private:
    template <typename... Parts> [[noreturn]] void corrupt(Parts&&... parts) const {
        fail(status::format, path_, ": ", context_, context_.empty() ? "" : ": ",
             std::forward<Parts>(parts)..., " (at byte offset ", field_, ")");
    }

    uint64_t remaining() const noexcept { return bytes_.size() - pos_; }

    // Counts `n` more bytes of memory for the parsed metadata, refusing the file before they are
    // allocated when the total would pass max_metadata_memory.
    void charge(uint64_t n, const char* what) {
        if (n > max_metadata_memory - memory_)
            corrupt(what, " would bring the parsed metadata to more than ", max_metadata_memory,
                    " bytes of memory (", memory_, " so far, ", n, " more); not a model file");
        memory_ += n;
    }

    void need(uint64_t n, const char* what) const {
        if (n > remaining())
            corrupt(what, " needs ", n, " bytes but only ", remaining(),
                    " remain (file truncated or corrupt)");
    }

    template <typename T> T read(const char* what) {
        field_ = pos_;
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(const char* what) {
        const uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            corrupt(what, " length ", len, " exceeds the ", remaining(),
                    " bytes that remain (file truncated or corrupt)");
        charge(len + 1, what);
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
        pos_ += len;
        return s;
    }

    void read_header(parsed& out) {
        need(4, "magic");
        const uint8_t* m = bytes_.data();
        if (std::memcmp(m, wire::magic_sparse, 4) == 0) {
            out.sparse = true;
        } else if (std::memcmp(m, wire::magic_dense, 4) != 0) {
            static constexpr char hex[] = "0123456789abcdef";
            std::string found;
            for (int i = 0; i < 4; ++i) {
                found += hex[m[i] >> 4];
                found += hex[m[i] & 15];
                if (i < 3) found += ' ';
            }
            corrupt("bad magic: expected \"GGUF\" or \"PWRI\", found bytes ", found,
                    "; not a GGUF file");
        }
        pos_ = 4;
        const uint32_t v = read<uint32_t>("version");
        if (v == 1) corrupt("GGUFv1 is no longer supported; convert the file to v3");
        // A big-endian writer leaves the magic as is but swaps the version (gguf_reader.py).
        const uint32_t swapped = __builtin_bswap32(v);
        if ((v & 0xffffu) == 0 && swapped >= 1 && swapped <= 3)
            corrupt("big-endian (byte-swapped) GGUF v", swapped,
                    " file; only little-endian files are supported");
        if (v != 2 && v != 3) corrupt("unsupported GGUF version ", v, " (expected 2 or 3)");
        out.version = v;
    }

    // Header fields sit at fixed offsets: magic 0, version 4, n_tensors 8, n_kv 16.
    void check_counts(uint64_t n_tensors, uint64_t n_kv) {
        field_ = 16;
        if (n_kv > remaining() / min_kv_bytes)
            corrupt("n_kv = ", n_kv, " key-value pairs cannot fit in the ", remaining(),
                    " bytes that remain (file truncated or corrupt)");
        field_ = 8;
        const uint64_t left = remaining() - n_kv * min_kv_bytes;
        if (n_tensors > left / min_tensor_info_bytes)
            corrupt("n_tensors = ", n_tensors, " tensor infos cannot fit in the ", remaining(),
                    " bytes that remain (file truncated or corrupt)");
    }

    void read_metadata(parsed& out, uint64_t n_kv) {
        std::set<std::string, std::less<>> seen;
        charge(n_kv * (sizeof(std::pair<std::string, value>) + index_entry_bytes), "n_kv");
        out.kv.reserve(n_kv);
        for (uint64_t i = 0; i < n_kv; ++i) {
            context_ = concat("key #", i);
            std::string key = read_string("key");
            charge(key.size() + 1, "key"); // its copy in the duplicate check
            context_ = concat("key ", quoted(key));
            if (!seen.insert(key).second) corrupt("duplicate key");
            const uint32_t type_id = read<uint32_t>("value type");
            if (!wire::is_known(type_id)) corrupt("unknown value type ", type_id);
            value v;
            v.type = static_cast<value_type>(type_id);
            if (v.type == value_type::array) {
                v.data = read_array();
            } else {
                v.data = read_scalar<decltype(v.data)>(v.type);
            }
            if (key == wire::alignment_key) out.alignment = alignment_of(v);
            out.kv.emplace_back(std::move(key), std::move(v));
        }
        context_.clear();
    }

    template <typename V> V read_scalar(value_type t) {
        switch (t) {
        case value_type::u8:
            return V(uint64_t{read<uint8_t>("u8 value")});
        case value_type::i8:
            return V(int64_t{read<int8_t>("i8 value")});
        case value_type::u16:
            return V(uint64_t{read<uint16_t>("u16 value")});
        case value_type::i16:
            return V(int64_t{read<int16_t>("i16 value")});
        case value_type::u32:
            return V(uint64_t{read<uint32_t>("u32 value")});
        case value_type::i32:
            return V(int64_t{read<int32_t>("i32 value")});
        case value_type::u64:
            return V(read<uint64_t>("u64 value"));
        case value_type::i64:
            return V(read<int64_t>("i64 value"));
        case value_type::f32:
            return V(double{read<float>("f32 value")});
        case value_type::f64:
            return V(read<double>("f64 value"));
        case value_type::boolean: {
            const uint8_t b = read<uint8_t>("bool value");
            if (b > 1) corrupt("bool value ", unsigned{b}, " is neither 0 nor 1");
            return V(b == 1);
        }
        case value_type::string:
            return V(read_string("string"));
        case value_type::array:
            break;
        }
        corrupt("internal: scalar read of an array");
    }

    using element = decltype(array_value::elems)::value_type;

    array_value read_array() {
        array_value arr;
        const uint32_t elem_id = read<uint32_t>("array element type");
        if (elem_id == static_cast<uint32_t>(value_type::array))
            corrupt("nested arrays are not supported");
        if (!wire::is_known(elem_id)) corrupt("unknown array element value type ", elem_id);
        arr.elem_type = static_cast<value_type>(elem_id);
        const uint64_t count = read<uint64_t>("array count");
        const size_t elem_size = wire::scalar_size(arr.elem_type);
        const uint64_t min_elem = elem_size != 0 ? elem_size : 8; // strings: at least a length
        if (count > remaining() / min_elem)
            corrupt("array count ", count, " of ", value_type_name(arr.elem_type),
                    " needs at least ", min_elem, " bytes each but only ", remaining(),
                    " bytes remain (file truncated or corrupt)");
        charge(count * sizeof(element), "array");
        arr.elems.reserve(count);
        for (uint64_t i = 0; i < count; ++i)
            arr.elems.push_back(read_scalar<element>(arr.elem_type));
        return arr;
    }

    // The C reader wants u32 and gguf_reader.py u64 (spec 1.3); both are accepted here.
    uint64_t alignment_of(const value& v) const {
        if (v.type != value_type::u32 && v.type != value_type::u64)
            corrupt("has type ", value_type_name(v.type), ", expected u32 or u64");
        const uint64_t a = std::get<uint64_t>(v.data);
        if (!wire::is_power_of_two(a)) corrupt("alignment ", a, " is not a non-zero power of two");
        return a;
    }

    void read_tensor_infos(parsed& out, uint64_t n_tensors) {
        std::set<std::string, std::less<>> seen;
        charge(n_tensors * (sizeof(tensor_info) + index_entry_bytes), "n_tensors");
        out.tensors.reserve(n_tensors);
        for (uint64_t i = 0; i < n_tensors; ++i) {
            context_ = concat("tensor #", i);
            tensor_info t;
            t.name = read_string("tensor name");
            charge(2 * (t.name.size() + 1), "tensor name"); // the duplicate check, the index
            context_ = concat("tensor ", quoted(t.name));
            if (!seen.insert(t.name).second) corrupt("duplicate tensor name");
            t.n_dims = read<uint32_t>("n_dims");
            if (t.n_dims < 1 || t.n_dims > wire::max_dims)
                corrupt("n_dims = ", t.n_dims, " is outside 1..", wire::max_dims);
            int64_t n_elements = 1;
            for (uint32_t d = 0; d < t.n_dims; ++d) {
                const uint64_t ne = read<uint64_t>("dimension");
                if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                    corrupt("dimension ", d, " = ", ne, " is negative as int64");
                t.ne[d] = static_cast<int64_t>(ne);
                if (__builtin_mul_overflow(n_elements, t.ne[d], &n_elements))
                    corrupt("element count overflows int64 at dimension ", d);
            }
            const uint32_t type_id = read<uint32_t>("tensor type");
            const type_traits tt = traits_of(type_id);
            if (tt.name == nullptr) corrupt("unknown tensor type id ", type_id);
            t.type = static_cast<ggml_type>(type_id);
            if (t.ne[0] % tt.block_size != 0)
                corrupt("row length ", t.ne[0], " is not a multiple of the block size ",
                        tt.block_size, " of type ", tt.name);
            if (__builtin_mul_overflow(static_cast<uint64_t>(n_elements) / tt.block_size,
                                       uint64_t{tt.type_size}, &t.n_bytes))
                corrupt("byte size overflows uint64");
            t.offset = read<uint64_t>("tensor data offset");
            if (t.offset % out.alignment != 0)
                corrupt("data offset ", t.offset, " is not aligned to ", out.alignment,
                        " bytes (misaligned)");
            out.tensors.push_back(std::move(t));
        }
        context_.clear();
    }

    void place_tensors(parsed& out) {
        field_ = pos_;
        const uint64_t a = out.alignment;
        const uint64_t pad = (a - pos_ % a) % a;
        if (pos_ > std::numeric_limits<uint64_t>::max() - pad)
            corrupt("data section offset overflows uint64");
        out.data_offset = pos_ + pad;
        if (out.tensors.empty()) return;
        if (out.data_offset > bytes_.size())
            corrupt("data section starts at byte ", out.data_offset, ", beyond the end of the ",
                    bytes_.size(), "-byte file (file truncated)");
        const uint64_t data_size = bytes_.size() - out.data_offset;
        for (tensor_info& t : out.tensors) {
            if (t.offset > data_size || t.n_bytes > data_size - t.offset)
                fail(status::format, path_, ": tensor ", quoted(t.name), ": data [", t.offset,
                     ", +", t.n_bytes, ") lies outside the ", data_size,
                     "-byte data section (file truncated or corrupt; data section at byte ",
                     out.data_offset, ")");
            t.data = bytes_.data() + out.data_offset + t.offset;
        }
        refuse_overlaps(out.tensors);
    }

    // Tensors share no bytes (ggml's reader wants each right after the previous one), so the
    // declared tensors never add up to more than the file holds, whatever reads them.
    void refuse_overlaps(const std::vector<tensor_info>& tensors) const {
        std::vector<const tensor_info*> order;
        order.reserve(tensors.size());
        for (const tensor_info& t : tensors)
            if (t.n_bytes != 0) order.push_back(&t);
        std::sort(order.begin(), order.end(),
                  [](const tensor_info* a, const tensor_info* b) { return a->offset < b->offset; });
        for (size_t i = 1; i < order.size(); ++i) {
            const tensor_info& a = *order[i - 1];
            const tensor_info& b = *order[i];
            if (b.offset < a.offset + a.n_bytes)
                fail(status::format, path_, ": tensor ", quoted(b.name), ": data [", b.offset,
                     ", +", b.n_bytes, ") overlaps the data of tensor ", quoted(a.name), " [",
                     a.offset, ", +", a.n_bytes, ") (file corrupt)");
        }
    }

    std::span<const uint8_t> bytes_;
    const std::string& path_;
    uint64_t pos_ = 0;
    uint64_t field_ = 0; // start of the field being read, for messages
    std::string context_;
    uint64_t memory_ = 0; // bytes of memory the parsed metadata takes so far, about
};

} // namespace

std::unique_ptr<file> file::open(const std::string& path, const open_options& options) {
    // The constructor is private, so make_unique cannot reach it.
    std::unique_ptr<file> f(new file());
    if (options.in_memory)
        f->contents_ = formats::read_file(path, options.progress);
    else
        f->map_ = std::make_unique<formats::mapped_file>(path);
    if (f->bytes().empty())
        fail(status::format, path, ": file is empty (0 bytes), not a GGUF file");
    f->path_ = path;
    parsed r = parser(f->bytes(), path).run();
    f->sparse_ = r.sparse;
    f->version_ = r.version;
    f->alignment_ = r.alignment;
    f->data_offset_ = r.data_offset;
    f->kv_ = std::move(r.kv);
    f->tensors_ = std::move(r.tensors);
    for (size_t i = 0; i < f->tensors_.size(); ++i)
        f->tensor_index_.emplace(f->tensors_[i].name, i);
    return f;
}

file::~file() = default;

std::span<const uint8_t> file::bytes() const noexcept {
    return map_ ? map_->bytes() : contents_.bytes();
}

} // namespace pi::gguf
