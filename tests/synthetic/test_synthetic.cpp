// The synthetic-model writer: what its construction promises, seen through the engine on tokens
// the calibration never saw, and how it fails (docs/synthetic-models.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/context.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;
using namespace pi;

namespace {

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> tensor_values(const gguf::file& f, const std::string& name) {
    const gguf::tensor_info* t = f.find_tensor(name);
    REQUIRE(t != nullptr);
    std::vector<float> v(static_cast<size_t>(t->n_bytes / (t->type == ggml_type::f16 ? 2 : 4)));
    for (size_t i = 0; i < v.size(); ++i) {
        if (t->type == ggml_type::f32) {
            std::memcpy(&v[i], t->data + 4 * i, 4);
        } else {
            uint16_t h = 0;
            std::memcpy(&h, t->data + 2 * i, 2);
            v[i] = fp16_to_fp32(h);
        }
    }
    return v;
}

std::vector<std::string> folder_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// Per layer, per neuron: tokens on which the engine's activation was non-zero.
struct firing {
    std::vector<std::vector<int64_t>> counts;
    int64_t tokens = 0;
};

// Runs 4 sequences of 48 random tokens (none of the calibration's) through the engine.
firing engine_firing(const model& m) {
    const hparams& hp = m.hp();
    firing f;
    f.counts.assign(static_cast<size_t>(hp.n_layer),
                    std::vector<int64_t>(static_cast<size_t>(hp.n_ff)));
    uint64_t state = 12345;
    for (int s = 0; s < 4; ++s) {
        context_options co;
        co.n_ctx = 64;
        context ctx(m, co);
        ctx.set_ffn_observer([&](const ffn_observation& o) {
            auto& layer = f.counts[static_cast<size_t>(o.layer)];
            for (int32_t t = 0; t < o.n_tokens; ++t)
                for (size_t i = 0; i < layer.size(); ++i)
                    layer[i] += o.activation[static_cast<size_t>(t) * layer.size() + i] != 0.0f;
            return true;
        });
        std::vector<int32_t> tokens(48);
        for (int32_t& t : tokens) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            t = 3 + static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(hp.n_vocab - 3));
        }
        batch_view batch;
        batch.tokens = tokens;
        ctx.decode(batch);
        f.tokens += static_cast<int64_t>(tokens.size());
    }
    return f;
}

} // namespace

TEST_CASE("every layer reaches the target sparsity with power-law skewed neurons") {
    const std::string dir = test::scratch_dir("synthetic_sparsity");
    synth_options o = test::tiny_model_options(false);
    o.n_layer = 4;
    o.dense_relu = true; // the dense ReLU FFN computes every neuron: the observer sees all
    const std::string path = test::write_tiny_model(dir, "m.gguf", o);
    const auto m = model::load(path, load_options{});
    const firing f = engine_firing(*m);
    for (size_t il = 0; il < f.counts.size(); ++il) {
        CAPTURE(il);
        std::vector<int64_t> c = f.counts[il];
        const int64_t fired = std::accumulate(c.begin(), c.end(), int64_t{0});
        const double inactive =
            1.0 - static_cast<double>(fired) / static_cast<double>(f.tokens * o.n_ff);
        CHECK(inactive >= 0.85);
        CHECK(inactive <= 0.94);
        std::sort(c.begin(), c.end(), std::greater<>());
        const int64_t top = std::accumulate(c.begin(), c.begin() + o.n_ff / 10, int64_t{0});
        CHECK(static_cast<double>(top) / static_cast<double>(fired) > 0.3);
    }
}

TEST_CASE("with power_law 0 every neuron fires about equally often") {
    const std::string dir = test::scratch_dir("synthetic_uniform");
    synth_options o = test::tiny_model_options(false);
    o.power_law = 0.0f;
    o.dense_relu = true;
    const auto m = model::load(test::write_tiny_model(dir, "m.gguf", o), load_options{});
    const firing f = engine_firing(*m);
    for (std::vector<int64_t> c : f.counts) {
        std::sort(c.begin(), c.end(), std::greater<>());
        const int64_t fired = std::accumulate(c.begin(), c.end(), int64_t{0});
        const int64_t top = std::accumulate(c.begin(), c.begin() + o.n_ff / 10, int64_t{0});
        CHECK(static_cast<double>(top) / static_cast<double>(fired) < 0.3);
    }
}

TEST_CASE("the exact predictor selects exactly the neurons the engine finds active") {
    const std::string dir = test::scratch_dir("synthetic_predictor");
    const synth_options o = test::tiny_model_options(true);
    const auto m = model::load(test::write_tiny_model(dir, "m.gguf", o), load_options{});
    context_options co;
    co.n_ctx = 64;
    co.audit_predictor = true;
    context ctx(*m, co);
    std::vector<int32_t> tokens(48);
    for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<int32_t>(5 + 37 * i % 4000);
    batch_view batch;
    batch.tokens = tokens;
    ctx.decode(batch);
    REQUIRE(ctx.audits().size() == static_cast<size_t>(o.n_layer));
    for (const predictor_audit& a : ctx.audits()) {
        CHECK(a.true_active > 0);
        CHECK(a.true_positive == a.true_active);
        CHECK(a.predicted_active == a.true_active);
    }
}

TEST_CASE("one seed gives identical files, and the kinds of a seed share their weights") {
    const std::string dir = test::scratch_dir("synthetic_twins");
    synth_options o = test::tiny_model_options(true);
    const std::string a = test::write_tiny_model(dir, "a.gguf", o);
    const std::string again = test::write_tiny_model(dir, "again.gguf", o);
    CHECK(bytes_of(a) == bytes_of(again));

    o.sparse = false;
    const std::string dense = test::write_tiny_model(dir, "dense.gguf", o);
    o.sparse = true;
    o.weight_type = ggml_type::f16;
    const std::string half = test::write_tiny_model(dir, "half.gguf", o);
    o.weight_type = ggml_type::f32;
    o.predictor_noise = 0.3f;
    const std::string noisy = test::write_tiny_model(dir, "noisy.gguf", o);

    const auto fa = gguf::file::open(a);
    const auto fd = gguf::file::open(dense);
    const auto fh = gguf::file::open(half);
    const auto fn = gguf::file::open(noisy);
    for (const std::string name : {"blk.1.ffn_gate.weight", "blk.1.attn_output.weight",
                                   "blk.0.ffn_up.weight", "output.weight"}) {
        CAPTURE(name);
        const std::vector<float> exact = tensor_values(*fa, name);
        CHECK(tensor_values(*fd, name) == exact);
        CHECK(tensor_values(*fn, name) == exact);
        std::vector<float> rounded = exact;
        for (float& v : rounded)
            v = fp16_to_fp32(fp32_to_fp16(v));
        CHECK(tensor_values(*fh, name) == rounded);
    }
    CHECK(tensor_values(*fn, "blk.0.fc2.weight") != tensor_values(*fa, "blk.0.fc2.weight"));
}

TEST_CASE("a write that fails after calibration leaves no output and no probe file") {
    const std::string dir = test::scratch_dir("synthetic_failure");
    const std::string out = (fs::path(dir) / "out.gguf").string();
    fs::create_directory(out); // the final rename cannot replace a folder
    try {
        write_synthetic_model(test::tiny_model_options(true), out);
        FAIL("writing onto a folder succeeded");
    } catch (const error& e) {
        CHECK(e.code() == status::io);
    }
    CHECK(folder_entries(dir) == std::vector<std::string>{"out.gguf"});
    CHECK(fs::is_empty(out));
}

TEST_CASE("an output folder that does not exist is an I/O error and creates nothing") {
    const std::string dir = test::scratch_dir("synthetic_no_folder");
    const std::string out = (fs::path(dir) / "missing" / "out.gguf").string();
    CHECK_THROWS_AS(write_synthetic_model(test::tiny_model_options(true), out), error);
    CHECK(fs::is_empty(dir));
}

TEST_CASE("bad options are rejected before anything is written, naming the option") {
    const std::string dir = test::scratch_dir("synthetic_bad_options");
    synth_options o = test::tiny_model_options(true);
    o.n_head = 5;
    try {
        write_synthetic_model(o, (fs::path(dir) / "out.gguf").string());
        FAIL("n_head 5 with n_embd 64 was accepted");
    } catch (const error& e) {
        CHECK(e.code() == status::invalid_argument);
        CHECK(std::string(e.what()) == "synthetic model: n_head (5) must divide n_embd (64)");
    }
    CHECK(fs::is_empty(dir));
}
