// The writer's families: the tensors and keys each one's file holds (docs/forward-pass.md,
// docs/synthetic-models.md "Families"), the twins of a seed, and the options a family refuses.
// What the LayerNorm families compute is checked against the NumPy oracle
// (tests/reference, reference_oracle_layernorm).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "synthetic/synthetic.hpp"

namespace fs = std::filesystem;
using namespace pi;

namespace {

using shapes = std::map<std::string, std::vector<int64_t>>;

synth_options family_options(const std::string& arch, bool sparse) {
    synth_options o = test::tiny_model_options(sparse);
    o.arch = arch;
    o.n_ctx_train = 64;
    return o;
}

shapes tensor_shapes(const gguf::file& f) {
    shapes s;
    for (const gguf::tensor_info& t : f.tensors())
        s[t.name] = std::vector<int64_t>(t.ne, t.ne + t.n_dims);
    return s;
}

std::vector<float> f32_values(const gguf::file& f, const std::string& name) {
    const gguf::tensor_info* t = f.find_tensor(name);
    REQUIRE(t != nullptr);
    REQUIRE(t->type == ggml_type::f32);
    std::vector<float> v(static_cast<size_t>(t->n_elements()));
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    return v;
}

std::vector<uint8_t> tensor_bytes(const gguf::file& f, const std::string& name) {
    const gguf::tensor_info* t = f.find_tensor(name);
    REQUIRE(t != nullptr);
    return {t->data, t->data + t->n_bytes};
}

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// d = 64, d_kv = 32 (4 heads, 2 KV heads), n_ff = 176, 4096 tokens, predictor rank 18.
constexpr int64_t d = 64, d_kv = 32, ff = 176, vocab = 4096, rank = 18;

void add_predictor_or_down(shapes& s, const std::string& p, bool sparse) {
    if (sparse) {
        s[p + "ffn_down_t.weight"] = {d, ff};
        s[p + "fc1.weight"] = {d, rank};
        s[p + "fc2.weight"] = {rank, ff};
    } else {
        s[p + "ffn_down.weight"] = {ff, d};
    }
}

shapes expected_falcon(bool sparse, bool norm_2) {
    shapes s{{"token_embd.weight", {d, vocab}},
             {"output_norm.weight", {d}},
             {"output_norm.bias", {d}},
             {"output.weight", {d, vocab}}};
    for (int layer = 0; layer < 2; ++layer) {
        const std::string p = "blk." + std::to_string(layer) + ".";
        s[p + "attn_norm.weight"] = {d};
        s[p + "attn_norm.bias"] = {d};
        if (norm_2) {
            s[p + "attn_norm_2.weight"] = {d};
            s[p + "attn_norm_2.bias"] = {d};
        }
        s[p + "attn_qkv.weight"] = {d, d + 2 * d_kv};
        s[p + "attn_output.weight"] = {d, d};
        s[p + "ffn_up.weight"] = {d, ff};
        add_predictor_or_down(s, p, sparse);
    }
    return s;
}

shapes expected_opt(bool sparse, int64_t n_ctx_train) {
    shapes s{{"token_embd.weight", {d, vocab}},
             {"position_embd.weight", {d, n_ctx_train + 2}},
             {"output_norm.weight", {d}},
             {"output_norm.bias", {d}}};
    for (int layer = 0; layer < 2; ++layer) {
        const std::string p = "blk." + std::to_string(layer) + ".";
        for (const char* n : {"attn_norm", "ffn_norm"}) {
            s[p + n + ".weight"] = {d};
            s[p + n + ".bias"] = {d};
        }
        s[p + "attn_q.weight"] = {d, d};
        s[p + "attn_q.bias"] = {d};
        s[p + "attn_k.weight"] = {d, d_kv};
        s[p + "attn_k.bias"] = {d_kv};
        s[p + "attn_v.weight"] = {d, d_kv};
        s[p + "attn_v.bias"] = {d_kv};
        s[p + "attn_output.weight"] = {d, d};
        s[p + "attn_output.bias"] = {d};
        s[p + "ffn_up.weight"] = {d, ff};
        s[p + "ffn_up.bias"] = {ff};
        add_predictor_or_down(s, p, sparse);
        s[p + (sparse ? "ffn_down_t.bias" : "ffn_down.bias")] = {d};
    }
    return s;
}

void check_layer_norm_keys(const gguf::file& f, const std::string& arch, bool rope) {
    CHECK(f.get_string("general.architecture") == arch);
    CHECK(f.get_u32(arch + ".embedding_length") == d);
    CHECK(f.get_u32(arch + ".block_count") == 2);
    CHECK(f.get_u32(arch + ".feed_forward_length") == ff);
    CHECK(f.get_u32(arch + ".attention.head_count") == 4);
    CHECK(f.get_u32(arch + ".attention.head_count_kv") == 2);
    CHECK(f.get_f32(arch + ".attention.layer_norm_epsilon") == 1e-5f);
    CHECK(f.find(arch + ".attention.layer_norm_rms_epsilon") == nullptr);
    CHECK((f.find(arch + ".rope.dimension_count") != nullptr) == rope);
}

} // namespace

TEST_CASE("falcon files hold the fused QKV, LayerNorm biases and no gate or ffn_norm") {
    const std::string dir = test::scratch_dir("synthetic_family_falcon");
    for (const bool sparse : {true, false}) {
        for (const bool forty : {false, true}) {
            CAPTURE(sparse);
            CAPTURE(forty);
            const synth_options o = family_options(forty ? "falcon-40b" : "falcon", sparse);
            const auto f = gguf::file::open(test::write_tiny_model(dir, "m.gguf", o));
            CHECK(f->sparse() == sparse);
            CHECK(tensor_shapes(*f) == expected_falcon(sparse, forty));
            check_layer_norm_keys(*f, "falcon", true);
            CHECK(f->get_string("general.name") ==
                  std::string("synthetic-") + (forty ? "falcon-40b" : "falcon") + "-64x2");
        }
    }
}

TEST_CASE("opt files hold learned positions with two offset rows, biases and no output") {
    const std::string dir = test::scratch_dir("synthetic_family_opt");
    for (const bool sparse : {true, false}) {
        CAPTURE(sparse);
        const synth_options o = family_options("opt", sparse);
        const auto f = gguf::file::open(test::write_tiny_model(dir, "m.gguf", o));
        CHECK(f->sparse() == sparse);
        CHECK(tensor_shapes(*f) == expected_opt(sparse, o.n_ctx_train));
        check_layer_norm_keys(*f, "opt", false);
        CHECK(f->get_u32("opt.context_length") == static_cast<uint32_t>(o.n_ctx_train));
    }
}

TEST_CASE("the biases of the LayerNorm families are random, not zero") {
    const std::string dir = test::scratch_dir("synthetic_family_biases");
    const auto f =
        gguf::file::open(test::write_tiny_model(dir, "m.gguf", family_options("opt", true)));
    const auto fal =
        gguf::file::open(test::write_tiny_model(dir, "f.gguf", family_options("falcon-40b", true)));
    const std::vector<std::pair<const gguf::file*, std::string>> biases = {
        {f.get(), "blk.0.attn_norm.bias"},     {f.get(), "blk.1.attn_q.bias"},
        {f.get(), "blk.0.attn_k.bias"},        {f.get(), "blk.0.attn_v.bias"},
        {f.get(), "blk.0.attn_output.bias"},   {f.get(), "blk.1.ffn_norm.bias"},
        {f.get(), "blk.0.ffn_up.bias"},        {f.get(), "blk.1.ffn_down_t.bias"},
        {f.get(), "output_norm.bias"},         {fal.get(), "blk.0.attn_norm.bias"},
        {fal.get(), "blk.1.attn_norm_2.bias"}, {fal.get(), "output_norm.bias"}};
    for (const auto& [file, name] : biases) {
        CAPTURE(name);
        const std::vector<float> v = f32_values(*file, name);
        const auto nonzero = std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; });
        CHECK(nonzero >= static_cast<long>(v.size()) - 1); // channel 0 may be held at zero
        CHECK(*std::max_element(v.begin(), v.end()) > 0.0f);
        CHECK(*std::min_element(v.begin(), v.end()) < 0.0f);
    }
}

TEST_CASE("a LayerNorm family's seed gives identical files and the same weights sparse or dense") {
    const std::string dir = test::scratch_dir("synthetic_family_twins");
    for (const std::string arch : {"falcon", "opt"}) {
        CAPTURE(arch);
        const synth_options o = family_options(arch, true);
        const std::string a = test::write_tiny_model(dir, "a.gguf", o);
        const std::string again = test::write_tiny_model(dir, "again.gguf", o);
        CHECK(bytes_of(a) == bytes_of(again));
        const std::string dense =
            test::write_tiny_model(dir, "dense.gguf", family_options(arch, false));
        const auto fa = gguf::file::open(a);
        const auto fd = gguf::file::open(dense);
        for (const gguf::tensor_info& t : fd->tensors()) {
            if (t.name.find("ffn_down") != std::string::npos) continue; // transposed: below
            CAPTURE(t.name);
            CHECK(tensor_bytes(*fd, t.name) == tensor_bytes(*fa, t.name));
        }
        const std::vector<float> down = f32_values(*fd, "blk.1.ffn_down.weight");
        const std::vector<float> down_t = f32_values(*fa, "blk.1.ffn_down_t.weight");
        for (int64_t i = 0; i < ff; i += 17)
            for (int64_t j = 0; j < d; j += 5)
                CHECK(down_t[static_cast<size_t>(i * d + j)] ==
                      down[static_cast<size_t>(j * ff + i)]);
    }
}

TEST_CASE("prosparse writes a llama file under its own name") {
    const std::string dir = test::scratch_dir("synthetic_family_prosparse");
    const auto pro =
        gguf::file::open(test::write_tiny_model(dir, "p.gguf", family_options("prosparse", true)));
    const auto llama =
        gguf::file::open(test::write_tiny_model(dir, "l.gguf", family_options("llama-relu", true)));
    CHECK(pro->get_string("general.architecture") == "llama");
    CHECK(pro->get_string("general.name") == "synthetic-prosparse-64x2");
    CHECK(llama->get_string("general.name") == "synthetic-llama-64x2");
    CHECK(tensor_shapes(*pro) == tensor_shapes(*llama));
    CHECK(pro->find_tensor("blk.0.ffn_gate.weight") != nullptr);
}

TEST_CASE("options a family cannot honour are refused, naming them") {
    const std::string dir = test::scratch_dir("synthetic_family_refusals");
    const std::string out = (fs::path(dir) / "out.gguf").string();
    auto message_of = [&](const synth_options& o) {
        try {
            write_synthetic_model(o, out);
        } catch (const error& e) {
            CHECK(e.code() == status::invalid_argument);
            return std::string(e.what());
        }
        FAIL("accepted");
        return std::string();
    };
    synth_options swiglu = family_options("falcon", false);
    swiglu.dense_relu = false;
    CHECK(message_of(swiglu) == "synthetic model: dense_relu = 0 asks for SwiGLU, which needs a "
                                "gate; falcon's FFN has none (relu(up·x))");
    synth_options short_ctx = family_options("opt", true);
    short_ctx.n_ctx_train = 16;
    CHECK(message_of(short_ctx) == "synthetic model: n_ctx_train (16) must be >= 32 for opt: the "
                                   "calibration sequences take that many learned positions");
    CHECK(message_of(family_options("qwen2", true)) ==
          "synthetic model: arch 'qwen2' is not one of llama (llama-relu), prosparse, bamboo, "
          "falcon, falcon-40b, opt");
    CHECK(fs::is_empty(dir));
}
