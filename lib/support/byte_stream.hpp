#pragma once
// Little-endian blobs of saved state (docs/state.md): a writer that appends, and a reader whose
// every read is bounds-checked and fails with status::format naming what was cut short.
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "support/error.hpp"

namespace pi {

static_assert(std::endian::native == std::endian::little, "saved state is little-endian");

class byte_writer {
  public:
    explicit byte_writer(std::vector<uint8_t>& out) : out_(out) {}

    template <typename T> void put(const T& value) {
        static_assert(std::is_trivially_copyable_v<T>);
        bytes(&value, sizeof(T));
    }
    void bytes(const void* data, size_t n) {
        if (n == 0) return;
        const size_t at = out_.size();
        out_.resize(at + n);
        std::memcpy(out_.data() + at, data, n);
    }
    void text(std::string_view s) {
        put(static_cast<uint64_t>(s.size()));
        bytes(s.data(), s.size());
    }
    size_t size() const noexcept { return out_.size(); }

  private:
    std::vector<uint8_t>& out_;
};

class byte_reader {
  public:
    // `what` names the blob in error messages, e.g. "state".
    byte_reader(std::span<const uint8_t> data, std::string_view what) : data_(data), what_(what) {}

    template <typename T> T get(std::string_view field) {
        static_assert(std::is_trivially_copyable_v<T>);
        T value;
        std::memcpy(&value, take(sizeof(T), field).data(), sizeof(T));
        return value;
    }
    std::span<const uint8_t> take(size_t n, std::string_view field) {
        if (n > data_.size() - at_)
            fail(status::format, what_, " is truncated: ", field, " needs ", n, " bytes at offset ",
                 at_, ", ", data_.size() - at_, " left");
        const std::span<const uint8_t> part = data_.subspan(at_, n);
        at_ += n;
        return part;
    }
    std::string text(std::string_view field) {
        const auto n = get<uint64_t>(field);
        const std::span<const uint8_t> s = take(n, field);
        return std::string(reinterpret_cast<const char*>(s.data()), s.size());
    }
    size_t remaining() const noexcept { return data_.size() - at_; }
    // Fails unless every byte was read.
    void expect_end() const {
        if (at_ != data_.size())
            fail(status::format, what_, " has ", data_.size() - at_,
                 " unexpected bytes at its end");
    }

  private:
    std::span<const uint8_t> data_;
    std::string_view what_;
    size_t at_ = 0;
};

} // namespace pi
