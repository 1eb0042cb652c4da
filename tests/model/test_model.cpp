#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "../test_env.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

const std::string& model_path(bool sparse) {
    static const std::string dir = test::scratch_dir("model");
    static const std::string sparse_path = test::write_tiny_model(dir, "sparse.gguf", test::tiny_model_options(true));
    static const std::string dense_path = test::write_tiny_model(dir, "dense.gguf", test::tiny_model_options(false));
    return sparse ? sparse_path : dense_path;
}

std::string edited(const std::string& name, bool sparse, const std::function<void(test::model_edit&)>& edit) {
    static const std::string dir = test::scratch_dir("model_edits");
    return test::rewrite_model(model_path(sparse), dir + "/" + name, edit);
}

void expect_load_error(const std::string& path, status code, const std::string& needle,
                       const load_options& options = {}) {
    try {
        model::load(path, options);
        FAIL("loading " << path << " should have failed");
    } catch (const error& e) {
        CHECK(e.code() == code);
        CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
}

test::model_edit::tensor* find_tensor(test::model_edit& e, const std::string& name) {
    for (auto& t : e.tensors)
        if (t.name == name) return &t;
    FAIL("no tensor " << name);
    return nullptr;
}

gguf::value* find_key(test::model_edit& e, const std::string& key) {
    for (auto& [k, v] : e.kv)
        if (k == key) return &v;
    FAIL("no key " << key);
    return nullptr;
}

} // namespace

TEST_CASE("a sparse file loads with its geometry, predictor ranks and the ReGLU FFN") {
    const auto m = model::load(model_path(true), load_options{});
    CHECK(m->hp().n_embd == 64);
    CHECK(m->hp().n_layer == 2);
    CHECK(m->hp().n_head == 4);
    CHECK(m->hp().n_head_kv == 2);
    CHECK(m->hp().n_ff == 176);
    CHECK(m->hp().n_vocab == 4096);
    CHECK(m->hp().head_dim == 16);
    CHECK(m->sparse_file());
    CHECK(m->sparse_inference());
    CHECK(m->glu() == PIB_GLU_RELU);
    for (const layer_weights& l : m->layers()) CHECK(l.predictor_rank > 0);
    CHECK(m->sparse_threshold() == 0.0f);
}

TEST_CASE("forcing dense mode on a sparse file turns the predictor off") {
    load_options o;
    o.force_dense = true;
    const auto m = model::load(model_path(true), o);
    CHECK(m->sparse_file());
    CHECK_FALSE(m->sparse_inference());
}

TEST_CASE("dense files use ReLU when marked and SwiGLU otherwise, and the override wins") {
    CHECK(model::load(model_path(false), load_options{})->glu() == PIB_GLU_RELU);
    const std::string unmarked = edited("unmarked.gguf", false, [](test::model_edit& e) {
        std::erase_if(e.kv, [](const auto& kv) { return kv.first == "powerinfer.ffn_activation"; });
    });
    CHECK(model::load(unmarked, load_options{})->glu() == PIB_GLU_SILU);
    load_options relu;
    relu.activation = ffn_activation_choice::relu;
    CHECK(model::load(unmarked, relu)->glu() == PIB_GLU_RELU);
    load_options silu;
    silu.activation = ffn_activation_choice::silu;
    CHECK(model::load(model_path(false), silu)->glu() == PIB_GLU_SILU);
    try {
        model::load(model_path(true), silu);
        FAIL("SiLU on a sparse file should be refused");
    } catch (const error& e) {
        CHECK(e.code() == status::invalid_argument);
    }
}

TEST_CASE("the sparse threshold comes from the file, then the environment, then the load options") {
    const std::string path = edited("threshold.gguf", true, [](test::model_edit& e) {
        find_key(e, "powerinfer.sparse_threshold")->data = 0.25;
    });
    CHECK(model::load(path, load_options{})->sparse_threshold() == doctest::Approx(0.25f));
    pi::test::set_env("LLAMA_SPARSE_PRED_THRESHOLD", "0.5");
    CHECK(model::load(path, load_options{})->sparse_threshold() == doctest::Approx(0.5f));
    load_options o;
    o.override_threshold = true;
    o.sparse_threshold = -1.0f;
    CHECK(model::load(path, o)->sparse_threshold() == doctest::Approx(-1.0f));
    pi::test::unset_env("LLAMA_SPARSE_PRED_THRESHOLD");
}

TEST_CASE("a missing tensor is a format error naming it") {
    const std::string path = edited("missing.gguf", true, [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up.weight"; });
    });
    expect_load_error(path, status::format, "blk.1.ffn_up.weight");
    const std::string no_pred = edited("nopred.gguf", true, [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "blk.0.fc2.weight"; });
    });
    expect_load_error(no_pred, status::format, "blk.0.fc2.weight");
}

TEST_CASE("a tensor of the wrong shape is a format error naming it") {
    const std::string path = edited("shape.gguf", true, [](test::model_edit& e) {
        auto* t = find_tensor(e, "blk.0.attn_q.weight");
        t->dims = {32, 128};
    });
    expect_load_error(path, status::format, "blk.0.attn_q.weight");
}

TEST_CASE("a weight type without kernels is reported unsupported with its tensor and type") {
    const std::string path = edited("quant.gguf", true, [](test::model_edit& e) {
        auto* t = find_tensor(e, "blk.0.ffn_gate.weight");
        t->type = ggml_type::i8;
        t->data.assign(static_cast<size_t>(t->dims[0] * t->dims[1]), 0);
    });
    expect_load_error(path, status::unsupported, "blk.0.ffn_gate.weight");
    expect_load_error(path, status::unsupported, "I8");
}

TEST_CASE("Q8_K, ggml's activation-side type, is refused as a weight with its tensor and type") {
    static const std::string dir = test::scratch_dir("model_q8k");
    synth_options o = test::tiny_model_options(true);
    o.n_embd = 256; // whole Q8_K super-blocks per row
    const std::string wide = test::write_tiny_model(dir, "wide.gguf", o);
    const std::string path = test::rewrite_model(wide, dir + "/q8k.gguf", [](test::model_edit& e) {
        auto* t = find_tensor(e, "blk.0.attn_q.weight");
        t->type = ggml_type::q8_k;
        t->data.assign(static_cast<size_t>(t->dims[1]) * row_bytes(ggml_type::q8_k, t->dims[0]), 0);
    });
    expect_load_error(path, status::unsupported, "blk.0.attn_q.weight");
    expect_load_error(path, status::unsupported, "Q8_K");
}

TEST_CASE("a vocabulary whose size differs from the embedding rows is rejected") {
    const std::string path = edited("vocab.gguf", true, [](test::model_edit& e) {
        for (auto& [k, v] : e.kv)
            if (k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.scores" || k == "tokenizer.ggml.token_type") {
                auto& arr = std::get<gguf::array_value>(v.data);
                arr = arr.first(arr.size() - 1);
            }
    });
    expect_load_error(path, status::format, "token_embd");
}

TEST_CASE("a block_count beyond the layers the file holds is rejected naming the missing layer") {
    const std::string path = edited("layers.gguf", true, [](test::model_edit& e) {
        find_key(e, "llama.block_count")->data = uint64_t{4000};
    });
    expect_load_error(path, status::format, "block_count = 4000");
    expect_load_error(path, status::format, "'blk.3999.attn_norm.weight' is missing");
}

TEST_CASE("n_head that does not divide n_embd is rejected") {
    const std::string path = edited("heads.gguf", true, [](test::model_edit& e) {
        find_key(e, "llama.attention.head_count")->data = uint64_t{5};
    });
    expect_load_error(path, status::format, "n_head");
}

TEST_CASE("an unknown architecture is unsupported and names the architecture") {
    const std::string path = edited("arch.gguf", true, [](test::model_edit& e) {
        find_key(e, "general.architecture")->data = std::string("gptj");
    });
    expect_load_error(path, status::unsupported, "gptj");
    const std::string qwen = edited("qwen2.gguf", true, [](test::model_edit& e) {
        find_key(e, "general.architecture")->data = std::string("qwen2");
    });
    expect_load_error(qwen, status::unsupported, "'qwen2'");
    expect_load_error(qwen, status::unsupported, "llama, bamboo, falcon, opt");
}

TEST_CASE("a missing required key is a format error naming the key") {
    const std::string path = edited("nokey.gguf", true, [](test::model_edit& e) {
        std::erase_if(e.kv, [](const auto& kv) { return kv.first == "llama.block_count"; });
    });
    expect_load_error(path, status::format, "llama.block_count");
}

TEST_CASE("loading without mmap gives the same weights") {
    load_options o;
    o.use_mmap = false;
    const auto m = model::load(model_path(true), o);
    CHECK(m->layers().size() == 2);
}

TEST_CASE("the progress callback can cancel loading") {
    load_options o;
    o.progress = [](float, void*) { return false; };
    expect_load_error(model_path(true), status::cancelled, "cancelled", o);
}

namespace {

const std::string& family_path(const std::string& arch, bool sparse) {
    static const std::string dir = test::scratch_dir("model_families");
    static std::map<std::string, std::string> paths;
    const std::string key = arch + (sparse ? ".sparse" : ".dense");
    if (auto it = paths.find(key); it != paths.end()) return it->second;
    synth_options o = test::tiny_model_options(sparse);
    o.arch = arch;
    if (arch == "falcon") o.n_head_kv = 1;
    if (arch == "falcon-40b") o.n_head_kv = 2;
    return paths[key] = test::write_tiny_model(dir, key + ".gguf", o);
}

std::string family_edit(const std::string& arch, bool sparse, const std::string& name,
                        const std::function<void(test::model_edit&)>& edit) {
    static const std::string dir = test::scratch_dir("model_family_edits");
    return test::rewrite_model(family_path(arch, sparse), dir + "/" + name, edit);
}

} // namespace

TEST_CASE("falcon's fused attn_qkv is bound as Q, K and V row ranges, and attn_norm_2 when present") {
    for (const std::string arch : {"falcon", "falcon-40b"}) {
        const auto m = model::load(family_path(arch, true), load_options{});
        const hparams& h = m->hp();
        CHECK(h.arch->name == "falcon");
        CHECK(h.arch->rope_mode == PIB_ROPE_NEOX);
        const gguf::tensor_info* qkv = m->file().find_tensor("blk.0.attn_qkv.weight");
        REQUIRE(qkv != nullptr);
        const layer_weights& l = m->layers()[0];
        const size_t base = static_cast<size_t>(qkv->data - m->file().bytes().data());
        CHECK(l.wq.offset == base);
        CHECK(l.wq.ne1 == h.n_embd);
        CHECK(l.wk.offset == base + static_cast<size_t>(h.n_embd) * l.wq.nb1);
        CHECK(l.wk.ne1 == h.n_embd_kv());
        CHECK(l.wv.offset == l.wk.offset + static_cast<size_t>(h.n_embd_kv()) * l.wq.nb1);
        CHECK_FALSE(present(l.gate));
        CHECK_FALSE(present(l.ffn_norm));
        CHECK(present(l.attn_norm_b));
        CHECK(present(l.attn_norm_2) == (arch == "falcon-40b"));
        CHECK(present(m->output_norm_bias()));
    }
}

TEST_CASE("opt binds its biases and learned positions and ties the output to the embedding") {
    const auto m = model::load(family_path("opt", true), load_options{});
    const hparams& h = m->hp();
    CHECK_FALSE(h.arch->uses_rope);
    const gguf::tensor_info* pe = m->file().find_tensor("position_embd.weight");
    REQUIRE(pe != nullptr);
    CHECK(h.n_positions == pe->ne[1] - 2);
    CHECK(m->output().offset == m->token_embd().offset);
    for (const layer_weights& l : m->layers())
        for (const pib_tensor* b : {&l.bq, &l.bk, &l.bv, &l.bo, &l.ffn_norm_b, &l.up_b, &l.down_b})
            CHECK(present(*b));
}

TEST_CASE("a falcon or opt file missing a tensor of its family is a format error naming it") {
    const std::string no_qkv = family_edit("falcon", true, "falcon-noqkv.gguf", [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "blk.1.attn_qkv.weight"; });
    });
    expect_load_error(no_qkv, status::format, "blk.1.attn_qkv.weight");
    const std::string no_fc1 = family_edit("falcon", true, "falcon-nofc1.gguf", [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "blk.0.fc1.weight"; });
    });
    expect_load_error(no_fc1, status::format, "blk.0.fc1.weight");
    const std::string no_pos = family_edit("opt", true, "opt-nopos.gguf", [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "position_embd.weight"; });
    });
    expect_load_error(no_pos, status::format, "position_embd.weight");
    const std::string no_bias = family_edit("opt", false, "opt-nobias.gguf", [](test::model_edit& e) {
        std::erase_if(e.tensors, [](const auto& t) { return t.name == "blk.0.ffn_down.bias"; });
    });
    expect_load_error(no_bias, status::format, "blk.0.ffn_down.bias");
}

TEST_CASE("the SiLU FFN is refused for the gate-less families") {
    load_options o;
    o.activation = ffn_activation_choice::silu;
    expect_load_error(family_path("falcon", false), status::invalid_argument, "gate", o);
    expect_load_error(family_path("opt", false), status::invalid_argument, "gate", o);
}
