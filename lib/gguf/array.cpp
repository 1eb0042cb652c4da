// array_value: metadata arrays held in their GGUF encoding, and the walk that checks it.
#include <algorithm>
#include <string_view>
#include <utility>

#include "gguf/gguf.hpp"
#include "gguf/wire.hpp"
#include "support/error.hpp"

namespace pi::gguf {

namespace wire {

array_layout lay_out(value_type t, uint64_t count, std::span<const uint8_t> bytes) noexcept {
    using fault = array_layout::fault;
    const uint64_t size = scalar_size(t);
    if (size != 0) {
        if (count > bytes.size() / size) return {fault::short_elements, 0, 0, 0};
        const auto end = bytes.begin() + static_cast<std::ptrdiff_t>(count * size);
        if (t == value_type::boolean) {
            const auto bad = std::find_if(bytes.begin(), end, [](uint8_t b) { return b > 1; });
            if (bad != end) {
                const auto at = static_cast<uint64_t>(bad - bytes.begin());
                return {fault::bad_bool, at, at, *bad};
            }
        }
        return {fault::none, count * size, 0, 0};
    }
    uint64_t pos = 0;
    for (uint64_t i = 0; i < count; ++i) {
        const uint64_t left = bytes.size() - pos;
        if (left < 8) return {fault::short_length, pos, i, 0};
        const uint64_t len = load<uint64_t>(bytes.data() + pos);
        if (len > left - 8) return {fault::long_string, pos, i, len};
        pos += 8 + len;
    }
    return {fault::none, pos, 0, 0};
}

} // namespace wire

array_value::array_value(value_type t, size_t count, std::vector<uint8_t> owned)
    : elem_type_(t), count_(count), owned_(std::move(owned)), wire_(owned_) {}

array_value::array_value(const array_value& other)
    : elem_type_(other.elem_type_), count_(other.count_),
      owned_(other.wire_.begin(), other.wire_.end()), wire_(owned_) {}

array_value& array_value::operator=(const array_value& other) {
    if (this != &other) *this = array_value(other);
    return *this;
}

// A moved vector keeps its buffer, so a view of the owned bytes stays valid in the new array.
array_value::array_value(array_value&& other) noexcept
    : elem_type_(other.elem_type_), count_(std::exchange(other.count_, 0)),
      owned_(std::move(other.owned_)), wire_(std::exchange(other.wire_, {})) {
    other.owned_.clear();
}

array_value& array_value::operator=(array_value&& other) noexcept {
    if (this != &other) {
        elem_type_ = other.elem_type_;
        count_ = std::exchange(other.count_, 0);
        owned_ = std::move(other.owned_);
        wire_ = std::exchange(other.wire_, {});
        other.owned_.clear();
    }
    return *this;
}

namespace {

// A string's encoding, its u64 length and its bytes, at the end of `bytes`.
void append_string(std::vector<uint8_t>& bytes, std::string_view s) {
    const size_t at = bytes.size();
    bytes.resize(at + 8 + s.size());
    wire::store<uint64_t>(bytes.data() + at, s.size());
    std::copy(s.begin(), s.end(), bytes.data() + at + 8);
}

// Host values whose bytes are their encoding (wire.hpp: little-endian hosts only).
template <typename T> std::vector<uint8_t> bytes_of(std::span<const T> v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    return std::vector<uint8_t>(p, p + v.size_bytes());
}

} // namespace

array_value array_value::from_strings(std::span<const std::string> v) {
    size_t n = 0;
    for (const std::string& s : v)
        n += 8 + s.size();
    std::vector<uint8_t> bytes;
    bytes.reserve(n);
    for (const std::string& s : v)
        append_string(bytes, s);
    return array_value(value_type::string, v.size(), std::move(bytes));
}

array_value array_value::from_f32(std::span<const float> v) {
    return array_value(value_type::f32, v.size(), bytes_of(v));
}

array_value array_value::from_i32(std::span<const int32_t> v) {
    return array_value(value_type::i32, v.size(), bytes_of(v));
}

array_value array_value::from_elements(value_type t, std::span<const element> v) {
    if (t == value_type::array || !wire::is_known(static_cast<uint32_t>(t)))
        fail(status::invalid_argument, "gguf array: invalid element type ",
             static_cast<uint32_t>(t));
    const size_t size = wire::scalar_size(t);
    std::vector<uint8_t> bytes;
    bytes.reserve(size != 0 ? v.size() * size : 0);
    for (size_t i = 0; i < v.size(); ++i) {
        const auto* s = std::get_if<std::string_view>(&v[i]);
        if (t == value_type::string && s) {
            append_string(bytes, *s);
        } else if (wire::fits(t, v[i])) {
            const size_t at = bytes.size();
            bytes.resize(at + size);
            wire::encode(t, v[i], bytes.data() + at);
        } else {
            fail(status::invalid_argument, "gguf array: element ", i,
                 " does not match or fit the element type ", value_type_name(t));
        }
    }
    return array_value(t, v.size(), std::move(bytes));
}

array_value array_value::view(value_type t, uint64_t count, std::span<const uint8_t> bytes) {
    if (t == value_type::array || !wire::is_known(static_cast<uint32_t>(t)))
        fail(status::invalid_argument, "gguf array: invalid element type ",
             static_cast<uint32_t>(t));
    const wire::array_layout layout = wire::lay_out(t, count, bytes);
    if (layout.problem != wire::array_layout::fault::none || layout.end != bytes.size())
        fail(status::invalid_argument, "gguf array: ", bytes.size(), " bytes are not ", count,
             " encoded elements of type ", value_type_name(t));
    array_value out;
    out.elem_type_ = t;
    out.count_ = static_cast<size_t>(count);
    out.wire_ = bytes;
    return out;
}

array_value::element array_value::next(size_t& pos) const noexcept {
    const uint8_t* p = wire_.data() + pos;
    if (elem_type_ == value_type::string) {
        const auto len = static_cast<size_t>(wire::load<uint64_t>(p));
        pos += 8 + len;
        return std::string_view(reinterpret_cast<const char*>(p + 8), len);
    }
    pos += wire::scalar_size(elem_type_);
    return wire::decode<element>(elem_type_, p);
}

std::vector<array_value::element> array_value::elements() const {
    std::vector<element> out;
    out.reserve(count_);
    for_each([&](const element& e) { out.push_back(e); });
    return out;
}

array_value array_value::first(size_t n) const {
    if (n > count_)
        fail(status::invalid_argument, "gguf array: the first ", n, " of ", count_, " elements");
    size_t end = n * wire::scalar_size(elem_type_);
    if (elem_type_ == value_type::string)
        for (size_t i = 0; i < n; ++i)
            next(end);
    return array_value(elem_type_, n, std::vector<uint8_t>(wire_.begin(), wire_.begin() + end));
}

bool operator==(const array_value& a, const array_value& b) noexcept {
    return a.elem_type_ == b.elem_type_ && a.count_ == b.count_ &&
           std::equal(a.wire_.begin(), a.wire_.end(), b.wire_.begin(), b.wire_.end());
}

} // namespace pi::gguf
