// Our quantizers against ggml's own: every format's bytes for 128 adversarial and random rows
// must equal the bytes ggml's C reference quantizers wrote (scripts/make_quant_goldens.py, the
// oracle's build in tests/quant/data/quant_goldens.txt; docs/quantization.md). No ggml is
// needed here: the goldens are committed.
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

using pi::ggml_type;

namespace {

constexpr int64_t row_len = 256;
constexpr int64_t n_rows = 128;

std::vector<uint8_t> read_file(const std::string& name) {
    const std::string path = std::string(PI_QUANT_GOLDEN_DIR) + "/" + name;
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<float> golden_input() {
    const std::vector<uint8_t> bytes = read_file("quant_golden_input.f32");
    REQUIRE(bytes.size() == n_rows * row_len * sizeof(float));
    std::vector<float> x(n_rows * row_len);
    std::memcpy(x.data(), bytes.data(), bytes.size());
    return x;
}

// The first differing block of a row, for the failure message.
std::string first_difference(const uint8_t* ours, const uint8_t* theirs, size_t row_bytes,
                             uint32_t block_bytes) {
    for (size_t i = 0; i < row_bytes; ++i)
        if (ours[i] != theirs[i])
            return "block " + std::to_string(i / block_bytes) + ", byte " +
                   std::to_string(i % block_bytes) + ": ours " + std::to_string(ours[i]) +
                   ", ggml " + std::to_string(theirs[i]);
    return "none";
}

void check_format(ggml_type type) {
    const pi::type_traits tt = pi::traits_of(type);
    CAPTURE(std::string(tt.name));
    const std::vector<float> x = golden_input();
    const std::vector<uint8_t> golden = read_file(std::string("quant_golden_") + tt.name + ".bin");
    const size_t row_bytes = pi::row_bytes(type, row_len);
    REQUIRE(golden.size() == n_rows * row_bytes);
    int n_bad = 0;
    std::vector<uint8_t> ours(row_bytes);
    for (int64_t r = 0; r < n_rows; ++r) {
        REQUIRE(
            pi::quantize_row(type, std::span<const float>(x).subspan(r * row_len, row_len), ours));
        const uint8_t* theirs = golden.data() + r * row_bytes;
        if (std::memcmp(ours.data(), theirs, row_bytes) == 0) continue;
        if (++n_bad <= 3)
            FAIL_CHECK("row " << r << " differs from ggml at "
                              << first_difference(ours.data(), theirs, row_bytes, tt.type_size));
    }
    CHECK_MESSAGE(n_bad == 0, n_bad << " of " << n_rows << " rows differ from ggml");
}

} // namespace

TEST_CASE("the 32-element quantizers write ggml's bytes, fused rounding at near-ties included") {
    for (ggml_type t :
         {ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0})
        check_format(t);
}

TEST_CASE("the K-quant quantizers write ggml's bytes") {
    for (ggml_type t :
         {ggml_type::q2_k, ggml_type::q3_k, ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k})
        check_format(t);
}
