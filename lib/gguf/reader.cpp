// GGUF reader: maps the file read-only and parses it with every count, length and offset
// checked against the bytes that remain before it is used.
#include "gguf/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "formats/mapped_file.hpp"
#include "gguf/wire.hpp"
#include "support/error.hpp"

namespace pi::gguf {

namespace {

struct parsed {
    bool sparse = false;
    uint32_t version = 0;
    uint64_t alignment = wire::default_alignment;
    uint64_t data_offset = 0;
    std::vector<std::pair<std::string, value>> kv;
    std::vector<tensor_info> tensors;
    std::map<std::string_view, size_t, std::less<>> tensor_index;
};

// Smallest encodings, used to bound counts by the bytes left before anything is reserved.
constexpr uint64_t min_kv_bytes = 8 + 4 + 1; // key length, type, u8 value
constexpr uint64_t min_tensor_info_bytes =
    8 + 4 + 8 + 4 + 8; // name length, n_dims, ne0, type, offset

// Parsed metadata takes about the bytes it is read from: arrays, the vocabularies among them, are
// viewed in the file (gguf.hpp), and keys, strings and tensor names are copies no longer than
// their encoding. What it takes beyond that comes per key and per tensor: an entry and a tree
// node, some 170 bytes for a key the file may spell in 13. The parser adds up what it is about to
// allocate and refuses a file whose metadata would take more than the bytes of its header,
// metadata and tensor infos plus this allowance, which holds the entries of some 50,000 keys and
// tensors (models have a few dozen keys and at most a few thousand tensors). It is a constant,
// not a multiple of those bytes, which would let a file of tiny keys take 13 times its size.
constexpr uint64_t metadata_allowance = uint64_t(8) << 20;
// A node of the duplicate checks' and the tensor index's trees (links, a name viewed in the file,
// an index), as malloc rounds it, about.
constexpr uint64_t index_entry_bytes = 8 * sizeof(void*);

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

    // The bytes of the header, metadata and tensor infos: those read so far and the least that
    // the keys and tensor infos still to come take.
    uint64_t section_bytes() const noexcept {
        return pos_ + kv_left_ * min_kv_bytes + tensors_left_ * min_tensor_info_bytes;
    }

    // Counts `n` more bytes of memory for the parsed metadata, refusing the file before they are
    // allocated when the total would pass section_bytes() + metadata_allowance.
    void charge(uint64_t n, const char* what) {
        const uint64_t section = section_bytes();
        const uint64_t budget = section + metadata_allowance;
        if (n > budget - memory_)
            corrupt(what, " would bring the parsed metadata to more than ", budget,
                    " bytes of memory (the ", section, " bytes it is read from plus ",
                    metadata_allowance, "; ", memory_, " so far, ", n, " more); not a model file");
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
        const T v = wire::load<T>(bytes_.data() + pos_);
        pos_ += sizeof(T);
        return v;
    }

    // A string's bytes, viewed in the file.
    std::string_view read_view(const char* what) {
        const uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            corrupt(what, " length ", len, " exceeds the ", remaining(),
                    " bytes that remain (file truncated or corrupt)");
        const std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
        pos_ += len;
        return s;
    }

    std::string read_string(const char* what) {
        const std::string_view s = read_view(what);
        charge(s.size() + 1, what);
        return std::string(s);
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
        kv_left_ = n_kv;
        tensors_left_ = n_tensors;
    }

    void read_metadata(parsed& out, uint64_t n_kv) {
        std::set<std::string_view, std::less<>> seen; // keys viewed in the file
        charge(n_kv * sizeof(std::pair<std::string, value>), "n_kv");
        out.kv.reserve(n_kv);
        for (uint64_t i = 0; i < n_kv; ++i) {
            context_ = concat("key #", i);
            const std::string_view key = read_view("key");
            charge(key.size() + 1 + index_entry_bytes, "key");
            context_ = concat("key ", quoted(key));
            if (!seen.insert(key).second) corrupt("duplicate key");
            const uint32_t type_id = read<uint32_t>("value type");
            if (!wire::is_known(type_id)) corrupt("unknown value type ", type_id);
            value v;
            v.type = static_cast<value_type>(type_id);
            if (v.type == value_type::array) {
                v.data = read_array();
            } else {
                v.data = read_scalar(v.type);
            }
            if (key == wire::alignment_key) out.alignment = alignment_of(v);
            out.kv.emplace_back(std::string(key), std::move(v));
            --kv_left_;
        }
        context_.clear();
    }

    decltype(value::data) read_scalar(value_type t) {
        if (t == value_type::string) return read_string("string");
        field_ = pos_;
        const size_t size = wire::scalar_size(t);
        if (size > remaining())
            corrupt(value_type_name(t), " value needs ", size, " bytes but only ", remaining(),
                    " remain (file truncated or corrupt)");
        const uint8_t* p = bytes_.data() + pos_;
        if (t == value_type::boolean && *p > 1)
            corrupt("bool value ", unsigned{*p}, " is neither 0 nor 1");
        pos_ += size;
        return wire::decode<decltype(value::data)>(t, p);
    }

    // The elements stay in the file: the array views them once they are known to be well-formed.
    array_value read_array() {
        const uint32_t elem_id = read<uint32_t>("array element type");
        if (elem_id == static_cast<uint32_t>(value_type::array))
            corrupt("nested arrays are not supported");
        if (!wire::is_known(elem_id)) corrupt("unknown array element value type ", elem_id);
        const auto t = static_cast<value_type>(elem_id);
        const uint64_t count = read<uint64_t>("array count");
        const size_t elem_size = wire::scalar_size(t);
        const uint64_t min_elem = elem_size != 0 ? elem_size : 8; // strings: at least a length
        if (count > remaining() / min_elem)
            corrupt("array count ", count, " of ", value_type_name(t), " needs at least ", min_elem,
                    " bytes each but only ", remaining(),
                    " bytes remain (file truncated or corrupt)");
        const std::span<const uint8_t> rest = bytes_.subspan(pos_);
        const wire::array_layout layout = wire::lay_out(t, count, rest);
        field_ = pos_ + layout.end;
        using fault = wire::array_layout::fault;
        switch (layout.problem) {
        case fault::none:
            break;
        case fault::short_elements:
        case fault::short_length:
            corrupt("element ", layout.index, " runs past the end of the file (",
                    rest.size() - layout.end, " bytes remain; file truncated or corrupt)");
        case fault::long_string:
            corrupt("element ", layout.index, ": string length ", layout.found, " exceeds the ",
                    rest.size() - layout.end - 8, " bytes that remain (file truncated or corrupt)");
        case fault::bad_bool:
            corrupt("element ", layout.index, ": bool value ", layout.found, " is neither 0 nor 1");
        }
        pos_ += layout.end;
        return array_value::view(t, count, rest.first(layout.end));
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
        charge(n_tensors * sizeof(tensor_info), "n_tensors");
        out.tensors.reserve(n_tensors);
        for (uint64_t i = 0; i < n_tensors; ++i) {
            context_ = concat("tensor #", i);
            const std::string_view name = read_view("tensor name");
            charge(name.size() + 1 + index_entry_bytes, "tensor name");
            context_ = concat("tensor ", quoted(name));
            if (!out.tensor_index.emplace(name, out.tensors.size()).second)
                corrupt("duplicate tensor name");
            tensor_info t;
            t.name = std::string(name);
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
            --tensors_left_;
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
    uint64_t memory_ = 0;       // bytes of memory the parsed metadata takes so far, about
    uint64_t kv_left_ = 0;      // keys declared but not read yet
    uint64_t tensors_left_ = 0; // tensor infos declared but not read yet
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
    f->tensor_index_ = std::move(r.tensor_index);
    return f;
}

file::~file() = default;

std::span<const uint8_t> file::bytes() const noexcept {
    return map_ ? map_->bytes() : contents_.bytes();
}

} // namespace pi::gguf
