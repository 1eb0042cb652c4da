// The FFN observer against an independent recomputation from the file's weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/context.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

std::string observer_model(const std::string& name, bool sparse) {
    static const std::string dir = test::scratch_dir("ffn_observer");
    return test::write_tiny_model(dir, name, test::tiny_model_options(sparse));
}

// What an observer saw, row-major as it was handed over.
struct seen_layer {
    int32_t layer = 0, n_tokens = 0;
    std::vector<float> input, activation;
};

std::vector<seen_layer> observe(context& ctx, std::span<const int32_t> tokens) {
    std::vector<seen_layer> seen;
    ctx.set_ffn_observer([&](const ffn_observation& o) {
        seen.push_back({o.layer, o.n_tokens, {o.input.begin(), o.input.end()},
                        {o.activation.begin(), o.activation.end()}});
        return true;
    });
    ctx.decode(batch_view{tokens, {}, {}});
    ctx.set_ffn_observer({});
    return seen;
}

// An F32 matrix of the file: `rows` rows of `cols` values.
struct matrix {
    const float* data;
    int64_t cols, rows;
    std::vector<double> times(const std::vector<double>& x) const {
        REQUIRE(static_cast<int64_t>(x.size()) == cols);
        std::vector<double> y(static_cast<size_t>(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                y[static_cast<size_t>(r)] += data[r * cols + c] * x[static_cast<size_t>(c)];
        return y;
    }
};

matrix tensor(const gguf::file& f, const std::string& name) {
    const gguf::tensor_info* t = f.find_tensor(name);
    REQUIRE_MESSAGE(t != nullptr, name);
    REQUIRE(t->type == ggml_type::f32);
    return {reinterpret_cast<const float*>(t->data), t->ne[0], t->ne[1]};
}

std::vector<double> rms_norm(const std::vector<double>& x, const matrix& w, double eps) {
    double ss = 0;
    for (double v : x)
        ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        y[i] = x[i] * scale * w.data[i];
    return y;
}

double max_abs(std::span<const double> v) {
    double r = 0;
    for (double x : v)
        r = std::max(r, std::abs(x));
    return r;
}

double max_abs_diff(std::span<const float> a, std::span<const double> b) {
    REQUIRE(a.size() == b.size());
    double r = 0;
    for (size_t i = 0; i < a.size(); ++i)
        r = std::max(r, std::abs(static_cast<double>(a[i]) - b[i]));
    return r;
}

} // namespace

TEST_CASE("the FFN observer sees every layer once per batch, in order, with the batch's shapes") {
    const auto m = model::load(observer_model("sparse.gguf", true), load_options{});
    const hparams& h = m->hp();
    context_options co;
    co.n_ctx = 64;
    context ctx(*m, co);
    const std::vector<int32_t> prompt = {1, 1064, 261, 2096, 395};
    for (const std::vector<int32_t>& batch : {prompt, std::vector<int32_t>{3588}}) {
        const auto seen = observe(ctx, batch);
        REQUIRE(seen.size() == static_cast<size_t>(h.n_layer));
        for (size_t il = 0; il < seen.size(); ++il) {
            CHECK(seen[il].layer == static_cast<int32_t>(il));
            CHECK(seen[il].n_tokens == static_cast<int32_t>(batch.size()));
            CHECK(seen[il].input.size() == batch.size() * static_cast<size_t>(h.n_embd));
            CHECK(seen[il].activation.size() == batch.size() * static_cast<size_t>(h.n_ff));
        }
    }
    // Removed: the next decode runs unobserved.
    const int32_t one[1] = {261};
    ctx.decode(batch_view{one, {}, {}});
    CHECK(ctx.n_past() == 7);
}

TEST_CASE("on a dense file the observed input and activation of a first token equal a "
          "recomputation from the file's weights") {
    const std::string path = observer_model("dense.gguf", false);
    const auto m = model::load(path, load_options{});
    const auto f = gguf::file::open(path);
    const hparams& h = m->hp();
    context_options co;
    co.n_ctx = 16;
    co.kv_f16 = false;
    context ctx(*m, co);
    const int32_t token = 2096;
    const std::vector<int32_t> one = {token};
    const auto seen = observe(ctx, one);
    REQUIRE(seen.size() == static_cast<size_t>(h.n_layer));

    // One token at position 0 attends only to itself: the attention output is Wo·V (each query
    // head reads the V of its cache head), whatever RoPE does to Q and K.
    const matrix embd = tensor(*f, "token_embd.weight");
    std::vector<double> x(embd.data + int64_t{token} * embd.cols,
                          embd.data + int64_t{token + 1} * embd.cols);
    const auto group = static_cast<size_t>(h.n_head / h.n_head_kv);
    const auto head_dim = static_cast<size_t>(h.head_dim);
    for (size_t il = 0; il < seen.size(); ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const auto v = tensor(*f, p + "attn_v.weight")
                           .times(rms_norm(x, tensor(*f, p + "attn_norm.weight"), h.norm_eps));
        std::vector<double> heads(static_cast<size_t>(h.n_embd));
        for (size_t i = 0; i < heads.size(); ++i)
            heads[i] = v[(i / head_dim / group) * head_dim + i % head_dim];
        const auto o = tensor(*f, p + "attn_output.weight").times(heads);
        for (size_t i = 0; i < x.size(); ++i)
            x[i] += o[i];
        CHECK(max_abs_diff(seen[il].input, x) <= 1e-4 * max_abs(x));

        const auto xn = rms_norm(x, tensor(*f, p + "ffn_norm.weight"), h.norm_eps);
        const auto gate = tensor(*f, p + "ffn_gate.weight").times(xn);
        const auto up = tensor(*f, p + "ffn_up.weight").times(xn);
        std::vector<double> act(gate.size());
        for (size_t i = 0; i < act.size(); ++i)
            act[i] = std::max(gate[i], 0.0) * up[i];
        CHECK(max_abs_diff(seen[il].activation, act) <= 1e-4 * max_abs(act));
        size_t active = 0, agree = 0;
        for (size_t i = 0; i < act.size(); ++i) {
            active += act[i] != 0.0;
            agree += (act[i] != 0.0) == (seen[il].activation[i] != 0.0f);
        }
        CHECK(active > 0);
        CHECK(active < act.size() / 2); // a ReLU FFN: most neurons are off
        CHECK(agree == act.size());

        const auto down = tensor(*f, p + "ffn_down.weight").times(act);
        for (size_t i = 0; i < x.size(); ++i)
            x[i] += down[i];
    }
}

TEST_CASE("a batch's observed rows equal those of decoding its tokens one at a time") {
    const auto m = model::load(observer_model("sparse.gguf", true), load_options{});
    context_options co;
    co.n_ctx = 32;
    co.kv_f16 = false;
    const std::vector<int32_t> prompt = {1, 1064, 261, 2096, 395, 3588};
    context batched(*m, co), stepped(*m, co);
    const auto all = observe(batched, prompt);
    const auto d = static_cast<size_t>(m->hp().n_embd), ff = static_cast<size_t>(m->hp().n_ff);
    for (size_t t = 0; t < prompt.size(); ++t) {
        const auto one = observe(stepped, std::span<const int32_t>(&prompt[t], 1));
        for (size_t il = 0; il < one.size(); ++il) {
            const std::span<const float> row(all[il].input.data() + t * d, d);
            std::vector<double> ref(one[il].input.begin(), one[il].input.end());
            CHECK(max_abs_diff(row, ref) <= 1e-4 * max_abs(ref));
            const std::span<const float> act(all[il].activation.data() + t * ff, ff);
            std::vector<double> act_ref(one[il].activation.begin(), one[il].activation.end());
            CHECK(max_abs_diff(act, act_ref) <= 1e-4 * max_abs(act_ref));
        }
    }
}

TEST_CASE("an observer returning false cancels the decode, which forgets the batch") {
    const auto m = model::load(observer_model("dense.gguf", false), load_options{});
    context_options co;
    co.n_ctx = 32;
    context ctx(*m, co);
    const std::vector<int32_t> first = {1, 1064}, second = {261, 2096};
    ctx.decode(batch_view{first, {}, {}});
    std::vector<int32_t> layers;
    ctx.set_ffn_observer([&](const ffn_observation& o) {
        layers.push_back(o.layer);
        return o.layer == 0;
    });
    try {
        ctx.decode(batch_view{second, {}, {}});
        FAIL("the decode was not stopped");
    } catch (const error& e) {
        CHECK(e.code() == status::cancelled);
        CHECK(std::string(e.what()).find("layer 1") != std::string::npos);
    }
    CHECK(layers == std::vector<int32_t>{0, 1});
    CHECK(ctx.n_past() == 2);
    CHECK(ctx.logits(-1).empty());
    ctx.set_ffn_observer({});
    ctx.decode(batch_view{second, {}, {}});
    CHECK(ctx.n_past() == 4);
}
