#pragma once
// Helpers of the GGUF tests: hand-built byte images for malformed files, and error checks.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "support/error.hpp"

// GCC 12 reports out-of-bounds writes in std::vector's growth path once these appends are
// inlined into a test (false positives of its -Warray-bounds and -Wstringop-overflow, fixed in
// GCC 13). The warnings are reported at the standard library's lines, so they stay off for the
// rest of each including test file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

namespace pi::test {

// Appends GGUF fields little-endian, so tests can state exactly which field is broken.
struct raw_gguf {
    std::vector<uint8_t> b;

    raw_gguf& bytes(const void* p, size_t n) {
        const auto* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
        return *this;
    }
    raw_gguf& u8(uint8_t v) { return bytes(&v, 1); }
    raw_gguf& u32(uint32_t v) { return bytes(&v, 4); }
    raw_gguf& u64(uint64_t v) { return bytes(&v, 8); }
    raw_gguf& str(std::string_view s) { return u64(s.size()).bytes(s.data(), s.size()); }
    raw_gguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3,
                     const char* magic = "GGUF") {
        return bytes(magic, 4).u32(version).u64(n_tensors).u64(n_kv);
    }
    raw_gguf& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
    raw_gguf& kv_string(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
    raw_gguf& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                     uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(dims.size()));
        for (uint64_t d : dims)
            u64(d);
        return u32(type).u64(offset);
    }
    raw_gguf& pad_to(size_t alignment) {
        while (b.size() % alignment != 0)
            b.push_back(0);
        return *this;
    }
    raw_gguf& zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
};

inline void save(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

inline std::vector<uint8_t> load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// open() must fail with `code`, naming the file and containing `word`.
inline void expect_open_error(const std::string& path, std::string_view word,
                              status code = status::format) {
    try {
        auto f = gguf::file::open(path);
        FAIL_CHECK("opened a file that should be rejected (expected '" << word << "')");
    } catch (const error& e) {
        const std::string msg = e.what();
        INFO("message: " << msg);
        CHECK(e.code() == code);
        CHECK(msg.find(word) != std::string::npos);
        CHECK(msg.find(path) != std::string::npos);
    }
}

} // namespace pi::test
