// Lookups and typed getters of a parsed GGUF file.
#include <limits>
#include <utility>

#include "gguf/gguf.hpp"
#include "gguf/wire.hpp"
#include "support/error.hpp"

namespace pi::gguf {

const char* value_type_name(value_type t) noexcept {
    switch (t) {
    case value_type::u8:
        return "u8";
    case value_type::i8:
        return "i8";
    case value_type::u16:
        return "u16";
    case value_type::i16:
        return "i16";
    case value_type::u32:
        return "u32";
    case value_type::i32:
        return "i32";
    case value_type::f32:
        return "f32";
    case value_type::boolean:
        return "bool";
    case value_type::string:
        return "string";
    case value_type::array:
        return "array";
    case value_type::u64:
        return "u64";
    case value_type::i64:
        return "i64";
    case value_type::f64:
        return "f64";
    }
    return "unknown";
}

namespace {

std::string describe(const value& v) {
    if (v.type != value_type::array) return value_type_name(v.type);
    return concat("array of ", value_type_name(std::get<array_value>(v.data).elem_type()));
}

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const value& v,
                             const char* expected) {
    fail(status::format, path, ": key '", key, "' has type ", describe(v), ", expected ", expected);
}

// Converts an integer of any width to T; false when the value is no integer or does not fit.
template <typename T, typename Variant> bool integer_as(value_type t, const Variant& data, T& out) {
    if (wire::is_unsigned(t)) {
        const uint64_t u = std::get<uint64_t>(data);
        if (!std::in_range<T>(u)) return false;
        out = static_cast<T>(u);
        return true;
    }
    if (wire::is_signed(t)) {
        const int64_t s = std::get<int64_t>(data);
        if (!std::in_range<T>(s)) return false;
        out = static_cast<T>(s);
        return true;
    }
    return false;
}

template <typename T>
T get_integer(const std::string& path, std::string_view key, const value& v, const char* name) {
    if (!wire::is_unsigned(v.type) && !wire::is_signed(v.type))
        wrong_type(path, key, v, concat("an integer fitting ", name).c_str());
    T out{};
    if (!integer_as(v.type, v.data, out))
        fail(status::format, path, ": key '", key, "' value does not fit in ", name);
    return out;
}

float get_float(const std::string& path, std::string_view key, const value& v) {
    if (!wire::is_float(v.type)) wrong_type(path, key, v, "f32 or f64");
    return static_cast<float>(std::get<double>(v.data));
}

const array_value& get_array(const std::string& path, std::string_view key, const value& v,
                             bool (*accepts)(value_type), const char* expected) {
    if (v.type != value_type::array || !accepts(std::get<array_value>(v.data).elem_type()))
        wrong_type(path, key, v, expected);
    return std::get<array_value>(v.data);
}

} // namespace

const value* file::find(std::string_view key) const noexcept {
    for (const auto& [k, v] : kv_)
        if (k == key) return &v;
    return nullptr;
}

const tensor_info* file::find_tensor(std::string_view name) const noexcept {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint32_t file::get_u32(std::string_view key) const {
    const value* v = find(key);
    if (!v) fail(status::format, path_, ": required key '", key, "' is missing");
    return get_integer<uint32_t>(path_, key, *v, "u32");
}

uint32_t file::get_u32(std::string_view key, uint32_t def) const {
    const value* v = find(key);
    return v ? get_integer<uint32_t>(path_, key, *v, "u32") : def;
}

uint64_t file::get_u64(std::string_view key, uint64_t def) const {
    const value* v = find(key);
    return v ? get_integer<uint64_t>(path_, key, *v, "u64") : def;
}

int32_t file::get_i32(std::string_view key, int32_t def) const {
    const value* v = find(key);
    return v ? get_integer<int32_t>(path_, key, *v, "i32") : def;
}

float file::get_f32(std::string_view key) const {
    const value* v = find(key);
    if (!v) fail(status::format, path_, ": required key '", key, "' is missing");
    return get_float(path_, key, *v);
}

float file::get_f32(std::string_view key, float def) const {
    const value* v = find(key);
    return v ? get_float(path_, key, *v) : def;
}

bool file::get_bool(std::string_view key, bool def) const {
    const value* v = find(key);
    if (!v) return def;
    if (v->type != value_type::boolean) wrong_type(path_, key, *v, "bool");
    return std::get<bool>(v->data);
}

std::string file::get_string(std::string_view key) const {
    const value* v = find(key);
    if (!v) fail(status::format, path_, ": required key '", key, "' is missing");
    if (v->type != value_type::string) wrong_type(path_, key, *v, "string");
    return std::get<std::string>(v->data);
}

std::string file::get_string(std::string_view key, const std::string& def) const {
    return find(key) ? get_string(key) : def;
}

std::vector<std::string> file::get_string_array(std::string_view key) const {
    const value* v = find(key);
    if (!v) fail(status::format, path_, ": required key '", key, "' is missing");
    const array_value& arr = get_array(
        path_, key, *v, [](value_type t) { return t == value_type::string; }, "array of string");
    std::vector<std::string> out;
    out.reserve(arr.size());
    arr.for_each(
        [&](const array_value::element& e) { out.emplace_back(std::get<std::string_view>(e)); });
    return out;
}

std::vector<float> file::get_f32_array(std::string_view key) const {
    const value* v = find(key);
    if (!v) return {};
    const array_value& arr = get_array(path_, key, *v, wire::is_float, "array of f32");
    std::vector<float> out;
    out.reserve(arr.size());
    arr.for_each([&](const array_value::element& e) {
        out.push_back(static_cast<float>(std::get<double>(e)));
    });
    return out;
}

std::vector<int32_t> file::get_i32_array(std::string_view key) const {
    const value* v = find(key);
    if (!v) return {};
    const array_value& arr = get_array(
        path_, key, *v, [](value_type t) { return wire::is_unsigned(t) || wire::is_signed(t); },
        "array of integers");
    std::vector<int32_t> out;
    out.reserve(arr.size());
    arr.for_each([&](const array_value::element& e) {
        int32_t x = 0;
        if (!integer_as(arr.elem_type(), e, x))
            fail(status::format, path_, ": key '", key, "' element ", out.size(),
                 " does not fit in i32");
        out.push_back(x);
    });
    return out;
}

} // namespace pi::gguf
