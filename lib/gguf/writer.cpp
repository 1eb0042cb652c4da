// GGUF v3 writer: validates values and tensors when they are added; a tensor_stream writes the
// file in one pass to a temporary name and renames it into place.
#include <algorithm>
#include <utility>

#include "gguf/gguf.hpp"
#include "gguf/wire.hpp"
#include "support/error.hpp"
#include "support/file_sink.hpp"

namespace pi::gguf {

namespace {

// True when the variant alternative matches the declared scalar type and the value fits it.
bool holds(value_type t, const decltype(value::data)& data) {
    if (t == value_type::string) return std::holds_alternative<std::string>(data);
    return wire::fits(t, data);
}

void validate(const std::string& key, const value& v) {
    if (!wire::is_known(static_cast<uint32_t>(v.type)))
        fail(status::invalid_argument, "gguf writer: key '", key, "' has unknown value type ",
             static_cast<uint32_t>(v.type));
    const bool ok = v.type == value_type::array ? std::holds_alternative<array_value>(v.data)
                                                : holds(v.type, v.data);
    if (!ok)
        fail(status::invalid_argument, "gguf writer: key '", key,
             "' holds a value that does not match or fit its type ", value_type_name(v.type));
}

// An array's elements go out as they are held: in their encoding.
void put_value(file_sink& out, const value& v) {
    out.pod(static_cast<uint32_t>(v.type));
    if (v.type == value_type::string) return out.str(std::get<std::string>(v.data));
    if (v.type == value_type::array) {
        const array_value& arr = std::get<array_value>(v.data);
        out.pod(static_cast<uint32_t>(arr.elem_type()));
        out.pod<uint64_t>(arr.size());
        return out.bytes(arr.wire().data(), arr.wire().size());
    }
    uint8_t bytes[8];
    wire::encode(v.type, v.data, bytes);
    out.bytes(bytes, wire::scalar_size(v.type));
}

value make_scalar(value_type t, decltype(value::data) d) {
    return value{t, std::move(d)};
}

} // namespace

writer::writer(bool sparse, uint32_t alignment) : sparse_(sparse), alignment_(alignment) {
    if (!wire::is_power_of_two(alignment))
        fail(status::invalid_argument, "gguf writer: alignment ", alignment,
             " is not a non-zero power of two");
}

void writer::set(std::string key, value v) {
    validate(key, v);
    if (key == wire::alignment_key) {
        uint64_t a = 0;
        if (v.type == value_type::u32 || v.type == value_type::u64) a = std::get<uint64_t>(v.data);
        if (a != alignment_)
            fail(status::invalid_argument, "gguf writer: ", key,
                 " must be a u32 or u64 equal to the writer's alignment ", alignment_);
    }
    for (auto& [k, old] : kv_) {
        if (k == key) {
            old = std::move(v);
            return;
        }
    }
    kv_.emplace_back(std::move(key), std::move(v));
}

void writer::set_u32(std::string key, uint32_t v) {
    set(std::move(key), make_scalar(value_type::u32, uint64_t{v}));
}
void writer::set_i32(std::string key, int32_t v) {
    set(std::move(key), make_scalar(value_type::i32, int64_t{v}));
}
void writer::set_u64(std::string key, uint64_t v) {
    set(std::move(key), make_scalar(value_type::u64, v));
}
void writer::set_f32(std::string key, float v) {
    set(std::move(key), make_scalar(value_type::f32, double{v}));
}
void writer::set_bool(std::string key, bool v) {
    set(std::move(key), make_scalar(value_type::boolean, v));
}
void writer::set_string(std::string key, std::string v) {
    set(std::move(key), make_scalar(value_type::string, std::move(v)));
}

void writer::set_string_array(std::string key, std::vector<std::string> v) {
    set(std::move(key), value{value_type::array, array_value::from_strings(v)});
}

void writer::set_f32_array(std::string key, std::span<const float> v) {
    set(std::move(key), value{value_type::array, array_value::from_f32(v)});
}

void writer::set_i32_array(std::string key, std::span<const int32_t> v) {
    set(std::move(key), value{value_type::array, array_value::from_i32(v)});
}

void writer::add_tensor(std::string name, ggml_type type, std::span<const int64_t> dims,
                        std::vector<uint8_t> data) {
    const uint64_t n_bytes = checked_size(name, type, dims);
    if (data.size() != n_bytes)
        fail(status::invalid_argument, "gguf writer: tensor '", name, "' needs ", n_bytes,
             " bytes of data, got ", data.size());
    tensors_.push_back(
        {std::move(name), type, {dims.begin(), dims.end()}, n_bytes, std::move(data)});
}

void writer::add_tensor_info(std::string name, ggml_type type, std::span<const int64_t> dims) {
    const uint64_t n_bytes = checked_size(name, type, dims);
    tensors_.push_back({std::move(name), type, {dims.begin(), dims.end()}, n_bytes, {}});
}

uint64_t writer::checked_size(const std::string& name, ggml_type type,
                              std::span<const int64_t> dims) const {
    for (const pending_tensor& t : tensors_)
        if (t.name == name)
            fail(status::invalid_argument, "gguf writer: duplicate tensor '", name, "'");
    if (dims.empty() || dims.size() > static_cast<size_t>(wire::max_dims))
        fail(status::invalid_argument, "gguf writer: tensor '", name, "' has ", dims.size(),
             " dims, expected 1..", wire::max_dims);
    const type_traits tt = traits_of(type);
    if (tt.name == nullptr)
        fail(status::invalid_argument, "gguf writer: tensor '", name, "' has unknown type id ",
             static_cast<uint32_t>(type));
    int64_t n = 1;
    for (int64_t d : dims)
        if (d < 0 || __builtin_mul_overflow(n, d, &n))
            fail(status::invalid_argument, "gguf writer: tensor '", name,
                 "' has a negative dimension or too many elements");
    if (dims[0] % tt.block_size != 0)
        fail(status::invalid_argument, "gguf writer: tensor '", name, "' row length ", dims[0],
             " is not a multiple of the block size ", tt.block_size, " of ", tt.name);
    return static_cast<uint64_t>(n) / tt.block_size * tt.type_size;
}

void writer::write(const std::string& path) const {
    tensor_stream out(*this, path);
    out.commit();
}

// The tensors added with their data are written by the stream itself when their turn comes (a
// declared tensor of no bytes is complete as soon as its turn comes).
struct tensor_stream::state {
    const std::vector<writer::pending_tensor>& tensors;
    uint32_t alignment;
    std::string path;
    file_sink out;
    size_t next = 0;        // the tensor being written
    uint64_t next_done = 0; // its bytes written so far

    state(const writer& w, std::string target)
        : tensors(w.tensors_), alignment(w.alignment_), path(std::move(target)), out(path) {}
    state(const state&) = delete;
    state& operator=(const state&) = delete;

    // Writes the held tensors and closes the complete ones up to the next one that needs data.
    void advance() {
        while (next < tensors.size()) {
            const writer::pending_tensor& t = tensors[next];
            if (!t.data.empty()) {
                out.set_where(concat(" in tensor '", t.name, "'"));
                out.bytes(t.data.data(), t.data.size());
            } else if (next_done != t.n_bytes) {
                return;
            }
            out.pad(alignment);
            ++next;
            next_done = 0;
        }
        out.set_where({});
    }
};

tensor_stream::tensor_stream(const writer& w, const std::string& path) {
    const bool has_alignment_key = std::any_of(
        w.kv_.begin(), w.kv_.end(), [](const auto& kv) { return kv.first == wire::alignment_key; });
    const bool add_alignment_key = w.alignment_ != wire::default_alignment && !has_alignment_key;
    s_ = std::make_unique<state>(w, path);
    file_sink& out = s_->out;
    out.bytes(w.sparse_ ? wire::magic_sparse : wire::magic_dense, 4);
    out.pod(wire::version);
    out.pod<uint64_t>(w.tensors_.size());
    out.pod<uint64_t>(w.kv_.size() + (add_alignment_key ? 1 : 0));
    // gguf-py's reader accepts general.alignment only as u32.
    const value alignment_value = make_scalar(value_type::u32, uint64_t{w.alignment_});
    if (add_alignment_key) {
        out.str(wire::alignment_key);
        put_value(out, alignment_value);
    }
    for (const auto& [key, v] : w.kv_) {
        out.str(key);
        put_value(out, key == wire::alignment_key ? alignment_value : v);
    }
    uint64_t offset = 0;
    for (const writer::pending_tensor& t : w.tensors_) {
        out.str(t.name);
        out.pod<uint32_t>(static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims)
            out.pod<uint64_t>(static_cast<uint64_t>(d));
        out.pod(static_cast<uint32_t>(t.type));
        out.pod(offset);
        offset += (t.n_bytes + w.alignment_ - 1) / w.alignment_ * w.alignment_;
    }
    out.pad(w.alignment_);
    s_->advance();
}

tensor_stream::~tensor_stream() = default;

void tensor_stream::append(std::span<const uint8_t> data) {
    state& s = *s_;
    if (s.next == s.tensors.size())
        fail(status::invalid_argument, "gguf writer: ", s.path, ": ", data.size(),
             " bytes of data beyond the last tensor");
    const writer::pending_tensor& t = s.tensors[s.next];
    if (data.size() > t.n_bytes - s.next_done)
        fail(status::invalid_argument, "gguf writer: ", s.path, ": tensor '", t.name, "' needs ",
             t.n_bytes - s.next_done, " more bytes, got ", data.size());
    s.out.set_where(concat(" in tensor '", t.name, "'"));
    s.out.bytes(data.data(), data.size());
    s.next_done += data.size();
    s.advance();
}

void tensor_stream::commit() {
    state& s = *s_;
    if (s.next != s.tensors.size())
        fail(status::invalid_argument, "gguf writer: ", s.path, ": tensor '",
             s.tensors[s.next].name, "' got ", s.next_done, " of its ", s.tensors[s.next].n_bytes,
             " bytes");
    s.out.commit(s.path);
}

} // namespace pi::gguf
