// PowerInfer's quantize mix (lib/model/quantize_model, docs/quantization.md): the type of every
// tensor of a quantized llama-, falcon- or 70B-shaped file, written out by hand for each target
// from the rules of PowerInfer's get_k_quant_type, and the bytes of each converted tensor, which
// must be the reference quantizer's.
#include "model/quantize_model.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "quant/types.hpp"
#include "support/log.hpp"
#include "support/test_support.hpp"

using pi::file_type;
using pi::ggml_type;
namespace fs = std::filesystem;

namespace {

constexpr int n_layer = 8;
// With 8 layers, use_more_bits picks layers 0 and 7 (the first and last eighth) and 3 and 6.
constexpr bool more_bits[n_layer] = {true, false, false, true, false, false, true, true};

struct model_spec {
    std::string arch = "llama";
    bool sparse = false;  // ffn_down_t and the predictor instead of ffn_down
    int64_t n_embd = 256; // rows of 256 take K-quants; others fall back
    int layers = n_layer; // layers with tensors
    uint32_t block_count = n_layer;
    uint32_t n_head = 4;
    uint32_t n_head_kv = 4;
    uint32_t experts = 0; // {arch}.expert_count, with ffn_gate_inp tensors
};

std::vector<float> values(int64_t n, int seed) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        x[i] = static_cast<float>(((i * 37 + seed * 11) % 101) - 50) / 37.0f;
    return x;
}

std::string write_model(const std::string& path, const model_spec& m) {
    pi::gguf::writer w(m.sparse);
    w.set_string("general.architecture", m.arch);
    w.set_u32(m.arch + ".block_count", m.block_count);
    w.set_u32(m.arch + ".attention.head_count", m.n_head);
    w.set_u32(m.arch + ".attention.head_count_kv", m.n_head_kv);
    if (m.experts) w.set_u32(m.arch + ".expert_count", m.experts);
    int seed = 0;
    auto add = [&](const std::string& name, ggml_type type, std::vector<int64_t> dims) {
        int64_t n = 1;
        for (int64_t d : dims)
            n *= d;
        std::vector<uint8_t> data(pi::row_bytes(type, n));
        REQUIRE(pi::quantize_row(type, values(n, ++seed), data));
        w.add_tensor(name, type, dims, std::move(data));
    };
    const int64_t e = m.n_embd, ff = 2 * m.n_embd;
    add("token_embd.weight", ggml_type::f16, {e, 2});
    for (int i = 0; i < m.layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        add(b + "attn_norm.weight", ggml_type::f32, {e});
        if (m.arch == "falcon") {
            add(b + "attn_qkv.weight", ggml_type::f16, {e, 2});
        } else {
            add(b + "attn_q.weight", ggml_type::f16, {e, 1});
            add(b + "attn_k.weight", ggml_type::f16, {e, 1});
            add(b + "attn_v.weight", ggml_type::f16, {e, 1});
        }
        add(b + "attn_output.weight", ggml_type::f16, {e, 1});
        if (m.arch != "falcon") add(b + "ffn_gate.weight", ggml_type::f16, {e, 1});
        if (m.experts) add(b + "ffn_gate_inp.weight", ggml_type::f32, {e, m.experts});
        add(b + "ffn_up.weight", ggml_type::f16, {e, 1});
        if (m.sparse) {
            add(b + "ffn_down_t.weight", ggml_type::f16, {e, 2});
            add(b + "fc1.weight", ggml_type::f32, {e, 32});
            add(b + "fc2.weight", ggml_type::f32, {32, ff});
        } else {
            add(b + "ffn_down.weight", ggml_type::f16, {ff, 1});
        }
    }
    add("output_norm.weight", ggml_type::f32, {e});
    add("output.weight", ggml_type::f32, {e, 2});
    w.write(path);
    return path;
}

// Quantizes and returns every tensor's output type by name; checks that each converted tensor
// holds the reference quantizer's bytes of the input's values.
std::map<std::string, ggml_type> quantize(const std::string& in, file_type target,
                                          bool pure = false, bool leave_output = false) {
    const std::string out = in + "." + pi::file_type_name(target) + (pure ? ".pure" : "");
    pi::quantize_options o;
    o.target = target;
    o.pure = pure;
    o.leave_output = leave_output;
    o.n_threads = 2;
    pi::quantize_model(in, out, o);
    const auto src = pi::gguf::file::open(in);
    const auto q = pi::gguf::file::open(out);
    CHECK(q->get_u32("general.file_type") == static_cast<uint32_t>(target));
    CHECK(q->get_u32("general.quantization_version") == 2);
    CHECK(q->sparse() == src->sparse());
    std::map<std::string, ggml_type> types;
    REQUIRE(q->tensors().size() == src->tensors().size());
    for (size_t i = 0; i < q->tensors().size(); ++i) {
        const pi::gguf::tensor_info& a = src->tensors()[i];
        const pi::gguf::tensor_info& b = q->tensors()[i];
        types[b.name] = b.type;
        if (a.type == b.type) continue;
        std::vector<float> x(static_cast<size_t>(a.n_elements()));
        REQUIRE(pi::dequantize_row(a.type, std::span<const uint8_t>(a.data, a.n_bytes), x));
        std::vector<uint8_t> expected(b.n_bytes);
        REQUIRE(pi::quantize_row(b.type, x, expected));
        CAPTURE(b.name);
        CHECK(std::memcmp(expected.data(), b.data, b.n_bytes) == 0);
    }
    fs::remove(out);
    return types;
}

std::string layer(int i, const char* name) {
    return "blk." + std::to_string(i) + "." + name + ".weight";
}

class log_silencer {
  public:
    log_silencer() { pi::set_log_sink(&log_silencer::sink, this); }
    ~log_silencer() { pi::set_log_sink(nullptr, nullptr); }
    log_silencer(const log_silencer&) = delete;
    log_silencer& operator=(const log_silencer&) = delete;
    bool saw(const std::string& part) const {
        for (const std::string& m : messages_)
            if (m.find(part) != std::string::npos) return true;
        return false;
    }

  private:
    static void sink(pi::log_level, const char* message, void* self) {
        static_cast<log_silencer*>(self)->messages_.emplace_back(message);
    }
    std::vector<std::string> messages_;
};

constexpr ggml_type F16 = ggml_type::f16, F32 = ggml_type::f32, Q4_0 = ggml_type::q4_0,
                    Q4_1 = ggml_type::q4_1, Q5_0 = ggml_type::q5_0, Q5_1 = ggml_type::q5_1,
                    Q8_0 = ggml_type::q8_0, Q2_K = ggml_type::q2_k, Q3_K = ggml_type::q3_k,
                    Q4_K = ggml_type::q4_k, Q5_K = ggml_type::q5_k, Q6_K = ggml_type::q6_k;

// The expected types of one target: attn_v (or attn_qkv) and ffn_down per layer, the others
// one type each.
struct expected {
    file_type target;
    ggml_type attn_v[n_layer];
    ggml_type ffn_down[n_layer];
    ggml_type attn_output;
    ggml_type attn_qk; // attn_q, attn_k (Falcon: unused)
    ggml_type ffn_gate_up;
    ggml_type token_embd;
    ggml_type output;
};

// `more` where use_more_bits picks the layer, `less` elsewhere.
void by_bits(ggml_type (&out)[n_layer], ggml_type more, ggml_type less) {
    for (int i = 0; i < n_layer; ++i)
        out[i] = more_bits[i] ? more : less;
}
void first(ggml_type (&out)[n_layer], int n, ggml_type head, ggml_type rest) {
    for (int i = 0; i < n_layer; ++i)
        out[i] = i < n ? head : rest;
}

void check_layers(const std::map<std::string, ggml_type>& t, const char* name,
                  const ggml_type (&want)[n_layer]) {
    for (int i = 0; i < n_layer; ++i) {
        CAPTURE(layer(i, name));
        CHECK(t.at(layer(i, name)) == want[i]);
    }
}

} // namespace

TEST_CASE("the mix of a llama file: output Q6_K, attn_v/ffn_down/attn_output by target and layer") {
    const std::string dir = pi::test::scratch_dir("quantize_mix_llama");
    const log_silencer quiet;
    const std::string in = write_model((fs::path(dir) / "llama.gguf").string(), {});
    std::vector<expected> cases;
    auto uniform = [](file_type target, ggml_type type, ggml_type output) {
        expected e{target, {}, {}, type, type, type, type, output};
        first(e.attn_v, 0, type, type);
        first(e.ffn_down, 0, type, type);
        return e;
    };
    {
        expected e = uniform(file_type::q2_k, Q2_K, Q6_K);
        first(e.attn_v, 0, Q3_K, Q3_K);
        first(e.ffn_down, 0, Q3_K, Q3_K);
        e.attn_output = e.ffn_gate_up = Q3_K;
        cases.push_back(e);
    }
    cases.push_back(uniform(file_type::q3_k_s, Q3_K, Q6_K));
    {
        expected e = uniform(file_type::q3_k_m, Q3_K, Q6_K);
        first(e.attn_v, 2, Q5_K, Q4_K);
        first(e.ffn_down, 2, Q5_K, Q4_K);
        e.attn_output = Q4_K;
        cases.push_back(e);
    }
    {
        expected e = uniform(file_type::q3_k_l, Q3_K, Q6_K);
        first(e.attn_v, 0, Q5_K, Q5_K);
        first(e.ffn_down, 0, Q5_K, Q5_K);
        e.attn_output = Q5_K;
        cases.push_back(e);
    }
    {
        expected e = uniform(file_type::q4_k_s, Q4_K, Q6_K);
        first(e.attn_v, 4, Q5_K, Q4_K);
        first(e.ffn_down, 4, Q5_K, Q4_K);
        cases.push_back(e);
    }
    {
        expected e = uniform(file_type::q4_k_m, Q4_K, Q6_K);
        by_bits(e.attn_v, Q6_K, Q4_K);
        by_bits(e.ffn_down, Q6_K, Q4_K);
        cases.push_back(e);
    }
    cases.push_back(uniform(file_type::q5_k_s, Q5_K, Q6_K));
    {
        expected e = uniform(file_type::q5_k_m, Q5_K, Q6_K);
        by_bits(e.attn_v, Q6_K, Q5_K);
        by_bits(e.ffn_down, Q6_K, Q5_K);
        cases.push_back(e);
    }
    cases.push_back(uniform(file_type::q6_k, Q6_K, Q6_K));
    cases.push_back(uniform(file_type::q4_0, Q4_0, Q6_K));
    cases.push_back(uniform(file_type::q5_1, Q5_1, Q6_K));
    cases.push_back(uniform(file_type::q8_0, Q8_0, Q8_0));      // Q8_0 keeps its output
    cases.push_back(uniform(file_type::mostly_f16, F16, Q6_K)); // even for F16, as PowerInfer
    cases.push_back(uniform(file_type::all_f32, F32, Q6_K));
    for (const expected& e : cases) {
        CAPTURE(pi::file_type_name(e.target));
        const auto t = quantize(in, e.target);
        check_layers(t, "attn_v", e.attn_v);
        check_layers(t, "ffn_down", e.ffn_down);
        for (int i = 0; i < n_layer; ++i) {
            CAPTURE(i);
            CHECK(t.at(layer(i, "attn_output")) == e.attn_output);
            CHECK(t.at(layer(i, "attn_q")) == e.attn_qk);
            CHECK(t.at(layer(i, "attn_k")) == e.attn_qk);
            CHECK(t.at(layer(i, "ffn_gate")) == e.ffn_gate_up);
            CHECK(t.at(layer(i, "ffn_up")) == e.ffn_gate_up);
            CHECK(t.at(layer(i, "attn_norm")) == F32);
        }
        CHECK(t.at("token_embd.weight") == e.token_embd);
        CHECK(t.at("output.weight") == e.output);
        CHECK(t.at("output_norm.weight") == F32);
    }
    // --leave-output-tensor: output.weight copied, the rest of the mix as before.
    const auto left = quantize(in, file_type::q4_k_m, false, true);
    CHECK(left.at("output.weight") == F32);
    CHECK(left.at(layer(0, "attn_v")) == Q6_K);
    CHECK(quantize(in, file_type::q4_0, true, true).at("output.weight") == F32);
    // --pure: every 2-D weight the target's type, output.weight included.
    for (file_type target : {file_type::q4_k_m, file_type::q4_0, file_type::q3_k_l}) {
        const auto t = quantize(in, target, true);
        for (const auto& [name, type] : t)
            CHECK(type == (name.find("norm") != std::string::npos ? F32 : pi::base_type(target)));
    }
}

TEST_CASE("the mix of a falcon file: output Q8_0, attn_qkv, and falcon's ffn_down and "
          "attn_output rules") {
    const std::string dir = pi::test::scratch_dir("quantize_mix_falcon");
    const log_silencer quiet;
    model_spec spec;
    spec.arch = "falcon";
    const std::string in = write_model((fs::path(dir) / "falcon.gguf").string(), spec);
    struct falcon_case {
        file_type target;
        ggml_type qkv;
        ggml_type ffn_down[n_layer];
        ggml_type attn_output, ffn_up, output;
    };
    std::vector<falcon_case> cases;
    {
        falcon_case c{file_type::q4_k_m, Q5_K, {}, Q4_K, Q4_K, Q8_0};
        by_bits(c.ffn_down, Q5_K, Q4_K);
        c.ffn_down[0] = c.ffn_down[1] = Q6_K;
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q3_k_m, Q4_K, {}, Q3_K, Q3_K, Q8_0};
        by_bits(c.ffn_down, Q4_K, Q3_K);
        c.ffn_down[0] = c.ffn_down[1] = Q5_K;
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q3_k_l, Q4_K, {}, Q4_K, Q3_K, Q8_0};
        first(c.ffn_down, 0, Q4_K, Q4_K);
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q4_k_s, Q4_K, {}, Q4_K, Q4_K, Q8_0};
        first(c.ffn_down, 0, Q4_K, Q4_K); // Q4_K_S's first-four rule skips Falcon
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q5_k_m, Q6_K, {}, Q5_K, Q5_K, Q8_0};
        by_bits(c.ffn_down, Q6_K, Q5_K);
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q2_k, Q2_K, {}, Q2_K, Q3_K, Q8_0};
        first(c.ffn_down, 0, Q3_K, Q3_K);
        cases.push_back(c);
    }
    {
        falcon_case c{file_type::q4_0, Q4_0, {}, Q4_0, Q4_0, Q8_0};
        first(c.ffn_down, 0, Q4_0, Q4_0);
        cases.push_back(c);
    }
    for (const falcon_case& c : cases) {
        CAPTURE(pi::file_type_name(c.target));
        const auto t = quantize(in, c.target);
        check_layers(t, "ffn_down", c.ffn_down);
        for (int i = 0; i < n_layer; ++i) {
            CAPTURE(i);
            CHECK(t.at(layer(i, "attn_qkv")) == c.qkv);
            CHECK(t.at(layer(i, "attn_output")) == c.attn_output);
            CHECK(t.at(layer(i, "ffn_up")) == c.ffn_up);
        }
        CHECK(t.at("output.weight") == c.output);
        CHECK(t.at("token_embd.weight") == pi::base_type(c.target));
    }
}

TEST_CASE("a sparse file: ffn_down_t takes the target's type, the predictor Q4_0 or Q5_0") {
    const std::string dir = pi::test::scratch_dir("quantize_mix_sparse");
    const log_silencer logs;
    model_spec spec;
    spec.sparse = true;
    const std::string in = write_model((fs::path(dir) / "sparse.gguf").string(), spec);
    const auto t = quantize(in, file_type::q4_k_m);
    ggml_type attn_v[n_layer];
    by_bits(attn_v, Q6_K, Q4_K);
    check_layers(t, "attn_v", attn_v);
    for (int i = 0; i < n_layer; ++i) {
        CAPTURE(i);
        CHECK(t.at(layer(i, "ffn_down_t")) == Q4_K); // not an "ffn_down.weight"
        CHECK(t.at(layer(i, "fc1")) == Q5_0);
        CHECK(t.at(layer(i, "fc2")) == Q5_0);
    }
    CHECK(t.at("output.weight") == Q6_K);
    // PowerInfer's "strange model" warning: 8 attn_v but no ffn_down.
    CHECK(logs.saw("strange model"));
    const auto q4 = quantize(in, file_type::q4_0);
    CHECK(q4.at(layer(3, "fc1")) == Q4_0);
    CHECK(q4.at(layer(3, "fc2")) == Q4_0);
    CHECK(q4.at(layer(3, "ffn_down_t")) == Q4_0);
}

TEST_CASE("K-quants on rows that do not split into 256 fall back to 32-element types") {
    const std::string dir = pi::test::scratch_dir("quantize_mix_fallback");
    const log_silencer logs;
    model_spec spec;
    spec.n_embd = 96; // rows of 96 and 192
    const std::string in = write_model((fs::path(dir) / "narrow.gguf").string(), spec);
    {
        const auto t = quantize(in, file_type::q4_k_m); // Q4_K -> Q5_0, Q6_K -> Q8_0
        ggml_type v[n_layer];
        by_bits(v, Q8_0, Q5_0);
        check_layers(t, "attn_v", v);
        check_layers(t, "ffn_down", v);
        CHECK(t.at(layer(2, "attn_q")) == Q5_0);
        CHECK(t.at("output.weight") == Q8_0);
    }
    {
        const auto t = quantize(in, file_type::q3_k_m); // Q3_K -> Q4_1, Q5_K -> Q5_1
        CHECK(t.at(layer(0, "attn_v")) == Q5_1);
        CHECK(t.at(layer(5, "attn_v")) == Q5_0); // Q4_K
        CHECK(t.at(layer(5, "attn_q")) == Q4_1);
    }
    {
        const auto t = quantize(in, file_type::q2_k); // Q2_K -> Q4_0
        CHECK(t.at(layer(1, "attn_q")) == Q4_0);
        CHECK(t.at(layer(1, "attn_v")) == Q4_1); // Q3_K
    }
    // --pure has no fallback (PowerInfer's quantize would abort): such weights stay as they
    // are, with a warning.
    const auto t = quantize(in, file_type::q4_k_s, true);
    CHECK(t.at(layer(1, "attn_q")) == F16);
    CHECK(t.at("output.weight") == F32);
    CHECK(logs.saw("'blk.1.attn_q.weight': rows of 96 elements are not a multiple of the Q4_K"));
}

TEST_CASE("a 70B-shaped llama gets more bits in attn_v; eight experts get Q8_0 attn_v/attn_k") {
    const std::string dir = pi::test::scratch_dir("quantize_mix_70b");
    const log_silencer quiet;
    model_spec spec;
    spec.layers = 2;
    spec.block_count = 80;
    spec.n_head = 8;
    spec.n_head_kv = 2; // grouped-query attention: llama.cpp's MODEL_70B
    const std::string gqa = write_model((fs::path(dir) / "70b.gguf").string(), spec);
    spec.n_head_kv = 8; // 80 layers without GQA is MODEL_65B
    const std::string mha = write_model((fs::path(dir) / "65b.gguf").string(), spec);
    // Two attn_v tensors: use_more_bits(0, 2) is false, use_more_bits(1, 2) true.
    auto t = quantize(gqa, file_type::q4_k_m);
    CHECK(t.at(layer(0, "attn_v")) == Q5_K);
    CHECK(t.at(layer(1, "attn_v")) == Q6_K);
    CHECK(quantize(gqa, file_type::q2_k).at(layer(0, "attn_v")) == Q5_K);
    t = quantize(mha, file_type::q4_k_m);
    CHECK(t.at(layer(0, "attn_v")) == Q4_K);
    CHECK(t.at(layer(1, "attn_v")) == Q6_K);
    CHECK(quantize(mha, file_type::q2_k).at(layer(0, "attn_v")) == Q3_K);

    model_spec moe;
    moe.layers = 2;
    moe.experts = 8;
    const std::string experts = write_model((fs::path(dir) / "moe.gguf").string(), moe);
    t = quantize(experts, file_type::q4_k_m);
    CHECK(t.at(layer(0, "attn_v")) == Q8_0);
    CHECK(t.at(layer(1, "attn_k")) == Q8_0);
    CHECK(t.at(layer(1, "attn_q")) == Q4_K);
    CHECK(t.at(layer(0, "ffn_gate_inp")) == F32); // the expert router is never quantized
}
