#pragma once
// GGUF container: a bounds-checked reader over an mmapped file, and a writer.
// Both magics are understood: "GGUF" (dense) and "PWRI" (PowerInfer sparse), versions 2 and 3.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "formats/read_file.hpp"
#include "quant/types.hpp"

namespace pi::formats {
class mapped_file;
}

namespace pi::gguf {

enum class value_type : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

const char* value_type_name(value_type t) noexcept;

// An array value: element type, count, and the elements in their encoding in the file
// (little-endian fixed-size numbers, bools as one byte 0 or 1, strings as a u64 length and the
// bytes). The arrays file::open() parses view the file's bytes, so that metadata takes no memory
// beyond the file however many elements it declares; copies, and the arrays the from_*
// functions make, own their bytes. The encoding is checked when an array is made, so reading it
// never fails.
class array_value {
public:
    // One element, widened as value::data holds a scalar; a string views the array's bytes.
    using element = std::variant<uint64_t, int64_t, double, bool, std::string_view>;

    array_value() = default; // no elements, of type u8
    array_value(const array_value& other);
    array_value& operator=(const array_value& other);
    array_value(array_value&& other) noexcept;
    array_value& operator=(array_value&& other) noexcept;
    ~array_value() = default;

    static array_value from_strings(std::span<const std::string> v);
    static array_value from_f32(std::span<const float> v);
    static array_value from_i32(std::span<const int32_t> v);
    // Elements of type t, in the widened form element holds; throws
    // pi::error(status::invalid_argument) when t is array or an element is not of t's form or
    // does not fit t.
    static array_value from_elements(value_type t, std::span<const element> v);
    // `count` elements of type t encoded in `bytes`, viewed where they are: the bytes must outlive
    // the array and whatever it is moved to. Throws pi::error(status::invalid_argument) when the
    // bytes are not exactly such elements.
    static array_value view(value_type t, uint64_t count, std::span<const uint8_t> bytes);

    value_type elem_type() const noexcept { return elem_type_; }
    size_t size() const noexcept { return count_; }
    bool empty() const noexcept { return count_ == 0; }
    std::span<const uint8_t> wire() const noexcept { return wire_; } // the encoded elements

    // Calls f(element) for every element in order.
    template <typename F> void for_each(F&& f) const {
        size_t pos = 0;
        for (size_t i = 0; i < count_; ++i)
            f(next(pos));
    }
    std::vector<element> elements() const;
    // The first n elements, n <= size() (throws pi::error(status::invalid_argument) otherwise).
    array_value first(size_t n) const;

    friend bool operator==(const array_value& a, const array_value& b) noexcept;

private:
    array_value(value_type t, size_t count, std::vector<uint8_t> owned);
    element next(size_t& pos) const noexcept; // the element at wire_[pos]; moves pos past it

    value_type elem_type_ = value_type::u8;
    size_t count_ = 0;
    std::vector<uint8_t> owned_; // empty when the elements are viewed elsewhere
    std::span<const uint8_t> wire_;
};

struct value {
    value_type type = value_type::u8;
    std::variant<uint64_t, int64_t, double, bool, std::string, array_value> data;
};

struct tensor_info {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1}; // ne[0] is the contiguous row length
    ggml_type type = ggml_type::f32;
    uint64_t offset = 0;    // relative to the data section
    uint64_t n_bytes = 0;   // size of the tensor's data
    const uint8_t* data = nullptr; // inside the mapping; valid while the file lives

    int64_t n_elements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// How open() holds the file's bytes: mapped (pages come from the file as they are read, so the
// file must not change while it is open) or read whole into memory (a copy that nothing done
// to the file afterwards reaches; docs/robustness.md).
struct open_options {
    bool in_memory = false;
    formats::read_progress progress; // in_memory: after each chunk read; false cancels
};

// A parsed GGUF file. Every count, length, offset and size has been checked against the
// file size before use, and the tensors' data ranges lie in the data section without
// overlapping; open() throws pi::error(status::format / status::io / status::out_of_memory)
// naming the cause.
class file {
public:
    static std::unique_ptr<file> open(const std::string& path, const open_options& options = {});
    ~file();
    file(const file&) = delete;
    file& operator=(const file&) = delete;

    const std::string& path() const noexcept { return path_; }
    bool sparse() const noexcept { return sparse_; } // magic "PWRI"
    uint32_t version() const noexcept { return version_; }
    uint64_t alignment() const noexcept { return alignment_; }
    uint64_t data_offset() const noexcept { return data_offset_; } // start of the data section
    std::span<const uint8_t> bytes() const noexcept; // the whole file, mapped or in memory
    bool in_memory() const noexcept { return !map_; }

    const std::vector<std::pair<std::string, value>>& metadata() const noexcept { return kv_; }
    const value* find(std::string_view key) const noexcept;
    const std::vector<tensor_info>& tensors() const noexcept { return tensors_; }
    const tensor_info* find_tensor(std::string_view name) const noexcept;

    // Typed getters: throw pi::error(status::format) naming the key when the key exists with an
    // incompatible type; the defaulted versions return the default when the key is absent,
    // the others throw when it is absent. Integer getters accept any integer type whose value fits.
    uint32_t get_u32(std::string_view key) const;
    uint32_t get_u32(std::string_view key, uint32_t def) const;
    uint64_t get_u64(std::string_view key, uint64_t def) const;
    int32_t get_i32(std::string_view key, int32_t def) const;
    float get_f32(std::string_view key) const;
    float get_f32(std::string_view key, float def) const;
    bool get_bool(std::string_view key, bool def) const;
    std::string get_string(std::string_view key) const;
    std::string get_string(std::string_view key, const std::string& def) const;
    std::vector<std::string> get_string_array(std::string_view key) const; // throws if absent
    std::vector<float> get_f32_array(std::string_view key) const;          // empty if absent
    std::vector<int32_t> get_i32_array(std::string_view key) const;        // empty if absent

private:
    file() = default;
    std::unique_ptr<formats::mapped_file> map_; // null when the file was read into memory
    formats::file_contents contents_;
    std::string path_;
    bool sparse_ = false;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, value>> kv_;
    std::vector<tensor_info> tensors_;
    std::map<std::string_view, size_t, std::less<>> tensor_index_; // names viewed in bytes()
};

class tensor_stream;

// Builds a GGUF v3 file: metadata in insertion order, tensors in insertion order, each tensor's
// data padded to the alignment. write() writes to a temporary file next to the target and
// renames it, so an interrupted write leaves no half file. For files too large to hold in
// memory, declare the tensors with add_tensor_info() and pass their data through a
// tensor_stream instead.
class writer {
public:
    explicit writer(bool sparse, uint32_t alignment = 32);

    void set(std::string key, value v); // replaces an existing key, keeps its position
    void set_u32(std::string key, uint32_t v);
    void set_i32(std::string key, int32_t v);
    void set_u64(std::string key, uint64_t v);
    void set_f32(std::string key, float v);
    void set_bool(std::string key, bool v);
    void set_string(std::string key, std::string v);
    void set_string_array(std::string key, std::vector<std::string> v);
    void set_f32_array(std::string key, std::span<const float> v);
    void set_i32_array(std::string key, std::span<const int32_t> v);

    // dims[0] is the contiguous row length; data must hold exactly the tensor's bytes.
    void add_tensor(std::string name, ggml_type type, std::span<const int64_t> dims,
                    std::vector<uint8_t> data);
    // A tensor whose data a tensor_stream takes later: its size follows from type and dims.
    void add_tensor_info(std::string name, ggml_type type, std::span<const int64_t> dims);

    // Throws pi::error(status::io), or invalid_argument when a tensor was declared without data.
    void write(const std::string& path) const;

private:
    friend class tensor_stream;
    struct pending_tensor {
        std::string name;
        ggml_type type;
        std::vector<int64_t> dims;
        uint64_t n_bytes;
        std::vector<uint8_t> data; // empty for add_tensor_info
    };
    // The byte size of a new tensor; throws pi::error(invalid_argument) for a bad one.
    uint64_t checked_size(const std::string& name, ggml_type type,
                          std::span<const int64_t> dims) const;
    bool sparse_;
    uint32_t alignment_;
    std::vector<std::pair<std::string, value>> kv_;
    std::vector<pending_tensor> tensors_;
};

// Writes a writer's file in one pass without holding the tensors: the constructor writes the
// header and every tensor's info to a temporary file next to path, append() takes the tensors'
// data in declaration order (a tensor may come in several pieces), commit() pads, syncs and
// renames the file into place. Destroyed without commit() (an error, a cancellation), it removes
// the temporary file. Errors are pi::error(status::io) naming the file and the tensor, or
// invalid_argument for data that does not fit the declared tensors.
class tensor_stream {
public:
    tensor_stream(const writer& w, const std::string& path);
    ~tensor_stream();
    tensor_stream(const tensor_stream&) = delete;
    tensor_stream& operator=(const tensor_stream&) = delete;

    void append(std::span<const uint8_t> data);
    void commit();

private:
    struct state;
    std::unique_ptr<state> s_;
};

} // namespace pi::gguf
