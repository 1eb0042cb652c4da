#pragma once
// Helpers of the tokenizer tests: the vector files' layout (docs/test-data.md), decoding to a
// string, random UTF-8 and catching a pi::error.
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi::test {

using ids = std::vector<int32_t>;

inline std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// `<vocab>.inp`: the texts, each followed by the line `__ggml_vocab_test__`.
inline std::vector<std::string> read_inputs(const std::string& path) {
    const std::string all = read_all(path);
    const std::string terminator = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = all.find(terminator, start)) != std::string::npos;) {
        out.push_back(all.substr(start, end - start));
        start = end + terminator.size();
    }
    REQUIRE(start == all.size()); // nothing after the last terminator
    return out;
}

// `<vocab>.out`: one line of ids per text, without BOS.
inline std::vector<ids> read_outputs(const std::string& path) {
    std::istringstream in(read_all(path));
    std::vector<ids> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        ids row;
        for (int32_t id; fields >> id;)
            row.push_back(id);
        out.push_back(row);
    }
    return out;
}

inline std::string decode(const tokenizer& t, const ids& v) {
    return t.decode(v.data(), v.size());
}

inline void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Valid UTF-8 drawn from ASCII (spaces and newlines included), Latin-1, Cyrillic, CJK and emoji.
inline std::string random_utf8(std::mt19937& rng, size_t n_chars) {
    static constexpr uint32_t ranges[][2] = {
        {0x20, 0x7E},     {0x09, 0x0A},       {0xA0, 0xFF},  {0x400, 0x4FF},
        {0x4E00, 0x9FFF}, {0x1F300, 0x1F6FF}, {0x80, 0x7FF}, {0xE000, 0xFFFD},
    };
    std::uniform_int_distribution<size_t> pick_range(0, std::size(ranges) - 1);
    std::string s;
    for (size_t i = 0; i < n_chars; ++i) {
        const auto& r = ranges[pick_range(rng)];
        append_utf8(s, std::uniform_int_distribution<uint32_t>(r[0], r[1])(rng));
    }
    return s;
}

template <typename F> error catch_error(F&& f) {
    try {
        f();
    } catch (const error& e) {
        return e;
    }
    FAIL("expected a pi::error");
    return error(status::ok, "");
}

} // namespace pi::test
