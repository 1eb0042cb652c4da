// pi_model_quantize through the public C API only, as a host program links it: argument checks,
// the struct_size contract, refusing to overwrite the input, cancellation, and a quantized
// (F16) synthetic model that loads and predicts like the original.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "powerinfer.h"

namespace fs = std::filesystem;

namespace {

std::string scratch(const std::string& name) {
    const fs::path p = fs::path(PI_TEST_BINARY_DIR) / "scratch" / name;
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
}

template <typename T> void put(std::vector<uint8_t>& b, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
}

void put_string(std::vector<uint8_t>& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
}

// A minimal GGUF v3 file: one string key and one F32 tensor [ne0, 2] of a ramp.
std::string write_minimal_gguf(const std::string& dir,
                               const std::string& tensor = "token_embd.weight", uint64_t ne0 = 64) {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    put<uint32_t>(b, 3);
    put<uint64_t>(b, 1); // tensors
    put<uint64_t>(b, 1); // keys
    put_string(b, "general.name");
    put<uint32_t>(b, 8);
    put_string(b, "minimal");
    put_string(b, tensor);
    put<uint32_t>(b, 2);
    put<uint64_t>(b, ne0);
    put<uint64_t>(b, 2);
    put<uint32_t>(b, 0); // F32
    put<uint64_t>(b, 0);
    while (b.size() % 32 != 0)
        b.push_back(0);
    for (int i = 0; i < static_cast<int>(2 * ne0); ++i)
        put<float>(b, 0.01f * static_cast<float>(i % 128 - 64));
    const std::string path = (fs::path(dir) / "minimal.gguf").string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    REQUIRE(out.good());
    return path;
}

std::vector<char> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

bool error_mentions(const char* part) {
    return std::strstr(pi_last_error(), part) != nullptr;
}

// The repository's own vocabulary, tests/data/relu-llama-kjv.vocab.gguf (docs/fixture.md).
std::string vocab_file() {
    return PI_TEST_FIXTURE_VOCAB;
}

} // namespace

TEST_CASE("pi_quantize_default_params: Q4_0, PowerInfer's mix, all threads, predictor quantized, "
          "no callback") {
    const pi_quantize_params p = pi_quantize_default_params();
    CHECK(p.struct_size == sizeof(pi_quantize_params));
    REQUIRE(p.type != nullptr);
    CHECK(std::string(p.type) == "Q4_0");
    CHECK(p.n_threads == 0);
    CHECK(p.keep_predictor == 0);
    CHECK(p.pure == 0);
    CHECK(p.leave_output_tensor == 0);
    CHECK((p.progress == nullptr));
}

TEST_CASE("pi_model_quantize checks its arguments and names the one at fault") {
    const std::string dir = scratch("quantize_api_args");
    const std::string in = write_minimal_gguf(dir);
    const std::string out = (fs::path(dir) / "out.gguf").string();
    pi_quantize_params p = pi_quantize_default_params();

    CHECK(pi_model_quantize(nullptr, out.c_str(), &p) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("in_path"));
    CHECK(pi_model_quantize(in.c_str(), nullptr, &p) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("out_path"));

    p.type = nullptr;
    CHECK(pi_model_quantize(in.c_str(), out.c_str(), &p) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("pi_quantize_params.type"));
    p.type = "Q4_K_L";
    CHECK(pi_model_quantize(in.c_str(), out.c_str(), &p) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("Q4_K_L"));

    p = pi_quantize_default_params();
    p.struct_size = 3;
    CHECK(pi_model_quantize(in.c_str(), out.c_str(), &p) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("struct_size"));

    const std::string missing = (fs::path(dir) / "missing.gguf").string();
    CHECK(pi_model_quantize(missing.c_str(), out.c_str(), nullptr) == PI_ERR_IO);
    CHECK(error_mentions("missing.gguf"));
    CHECK_FALSE(fs::exists(out));

    CHECK(pi_model_quantize(in.c_str(), in.c_str(), nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("same file"));
}

TEST_CASE("pi_model_quantize with NULL params or an older, shorter struct uses the defaults") {
    const std::string dir = scratch("quantize_api_defaults");
    const std::string in = write_minimal_gguf(dir);
    const std::string a = (fs::path(dir) / "a.gguf").string();
    const std::string b = (fs::path(dir) / "b.gguf").string();
    REQUIRE(pi_model_quantize(in.c_str(), a.c_str(), nullptr) == PI_OK);
    CHECK(std::string(pi_last_error()).empty());
    // A caller that knows only the fields up to type.
    pi_quantize_params p = pi_quantize_default_params();
    p.struct_size = offsetof(pi_quantize_params, n_threads);
    p.n_threads = 7777; // beyond struct_size: ignored
    REQUIRE(pi_model_quantize(in.c_str(), b.c_str(), &p) == PI_OK);
    CHECK(file_bytes(a) == file_bytes(b));
    // Q4_0 of [64, 2]: 4 blocks of 18 bytes, much smaller than the 512 bytes of F32.
    CHECK(fs::file_size(a) < fs::file_size(in));
}

TEST_CASE("pure and leave_output_tensor reach the quantizer: output.weight Q6_K, Q4_0 or F32") {
    const std::string dir = scratch("quantize_api_mix");
    const std::string in = write_minimal_gguf(dir, "output.weight", 256);
    auto size_with = [&](int pure, int leave) {
        pi_quantize_params p = pi_quantize_default_params();
        p.pure = pure;
        p.leave_output_tensor = leave;
        const std::string out = (fs::path(dir) / "out.gguf").string();
        REQUIRE(pi_model_quantize(in.c_str(), out.c_str(), &p) == PI_OK);
        const auto size = fs::file_size(out);
        fs::remove(out);
        return size;
    };
    // The same header each time; the data: 2 rows of Q6_K (2 x 210 bytes, padded to 448),
    // of Q4_0 (2 x 8 x 18 = 288) or F32 (2048).
    const auto mix = size_with(0, 0), pure = size_with(1, 0), left = size_with(0, 1);
    CHECK(mix - pure == 448 - 288);
    CHECK(left - pure == 2048 - 288);
}

TEST_CASE("a progress callback returning 0 cancels and leaves no output") {
    const std::string dir = scratch("quantize_api_cancel");
    const std::string in = write_minimal_gguf(dir);
    const std::string out = (fs::path(dir) / "out.gguf").string();
    pi_quantize_params p = pi_quantize_default_params();
    int calls = 0;
    p.progress = [](float, void* user) {
        ++*static_cast<int*>(user);
        return 0;
    };
    p.progress_user_data = &calls;
    CHECK(pi_model_quantize(in.c_str(), out.c_str(), &p) == PI_STATUS_CANCELLED);
    CHECK(calls == 1);
    CHECK_FALSE(fs::exists(out));
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
}

TEST_CASE("an F32 synthetic model converted to F16 loads and predicts like the original") {
    const std::string dir = scratch("quantize_api_f16");
    const std::string vocab = vocab_file();
    const std::string f32 = (fs::path(dir) / "f32.gguf").string();
    const std::string f16 = (fs::path(dir) / "f16.gguf").string();
    pi_synth_params sp = pi_synth_default_params();
    sp.n_embd = 64;
    sp.n_layer = 2;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 176;
    sp.seed = 11;
    sp.vocab_path = vocab.c_str();
    REQUIRE(pi_synth_model_write(&sp, f32.c_str()) == PI_OK);
    pi_quantize_params qp = pi_quantize_default_params();
    qp.type = "F16";
    qp.pure = 1;           // PowerInfer's mix would make output.weight Q8_0
    qp.keep_predictor = 1; // and the predictor F32, as it was written
    qp.n_threads = 2;
    REQUIRE(pi_model_quantize(f32.c_str(), f16.c_str(), &qp) == PI_OK);

    std::vector<std::vector<float>> logits;
    std::vector<std::string> weight_types;
    for (const std::string& path : {f32, f16}) {
        pi_model* model = nullptr;
        REQUIRE(pi_model_load(path.c_str(), nullptr, &model) == PI_OK);
        pi_model_info info{};
        info.struct_size = sizeof info;
        REQUIRE(pi_model_info_get(model, &info) == PI_OK);
        CHECK(info.sparse == 1);
        weight_types.emplace_back(info.weight_type);
        pi_context_params cp = pi_context_default_params();
        cp.n_ctx = 32;
        cp.n_threads = 1;
        pi_context* ctx = nullptr;
        REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
        const pi_token tokens[] = {1, 1064, 261, 2096, 395};
        const pi_batch batch = {5, tokens, nullptr, nullptr};
        REQUIRE(pi_decode(ctx, &batch) == PI_OK);
        const float* l = pi_get_logits(ctx, -1);
        REQUIRE(l != nullptr);
        logits.emplace_back(l, l + pi_n_vocab(model));
        pi_context_free(ctx);
        pi_model_free(model);
    }
    CHECK(weight_types[0] == "F32");
    CHECK(weight_types[1] == "F16");
    // Binary16 weights (11-bit mantissa) move the logits by well under 1% of their spread.
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < logits[0].size(); ++i) {
        diff2 += double(logits[0][i] - logits[1][i]) * (logits[0][i] - logits[1][i]);
        ref2 += double(logits[0][i]) * logits[0][i];
    }
    CHECK(std::sqrt(diff2 / ref2) < 0.01);
}
