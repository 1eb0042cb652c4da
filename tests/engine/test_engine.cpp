#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "engine/context.hpp"
#include "engine/generate.hpp"
#include "model/model.hpp"
#include "model/quantize_model.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;

namespace {

std::string model_file(const std::string& name, bool sparse, float noise = 0.0f, bool f16 = false) {
    static const std::string dir = test::scratch_dir("engine");
    synth_options o = test::tiny_model_options(sparse);
    o.predictor_noise = noise;
    o.weight_type = f16 ? ggml_type::f16 : ggml_type::f32;
    return test::write_tiny_model(dir, name, o);
}

// BOS and the first tokens of "In the beginning God created the heaven and the earth." in the
// fixture's vocabulary (its line in tests/data/relu-llama-kjv.vocab.gguf.out).
const std::vector<int32_t> prompt = {1, 1064, 261, 2096, 395, 3588, 261, 740};

std::vector<int32_t> greedy(const model& m, int n_threads, int n_new) {
    context_options co;
    co.n_ctx = 64;
    co.n_threads = n_threads;
    context ctx(m, co);
    ctx.decode(batch_view{prompt, {}, {}});
    std::vector<int32_t> out;
    for (int i = 0; i < n_new; ++i) {
        const auto l = ctx.logits(-1);
        const auto next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        out.push_back(next);
        const int32_t one[1] = {next};
        ctx.decode(batch_view{one, {}, {}});
    }
    return out;
}

std::vector<float> last_logits(const model& m) {
    context_options co;
    co.n_ctx = 64;
    co.kv_f16 = false;
    context ctx(m, co);
    ctx.decode(batch_view{prompt, {}, {}});
    const auto l = ctx.logits(-1);
    return {l.begin(), l.end()};
}

float max_abs(const std::vector<float>& v) {
    float r = 0;
    for (float x : v)
        r = std::max(r, std::abs(x));
    return r;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    float r = 0;
    for (size_t i = 0; i < a.size(); ++i)
        r = std::max(r, std::abs(a[i] - b[i]));
    return r;
}

} // namespace

TEST_CASE(
    "with an exact predictor, sparse and dense files of one seed give the same greedy tokens") {
    const auto sparse = model::load(model_file("sparse.gguf", true), load_options{});
    const auto dense = model::load(model_file("dense.gguf", false), load_options{});
    const auto a = greedy(*sparse, 1, 12);
    const auto b = greedy(*dense, 1, 12);
    CHECK(a == b);
    const auto la = last_logits(*sparse), lb = last_logits(*dense);
    CHECK(max_abs_diff(la, lb) <= 1e-3f * max_abs(lb));
    // Varied output, not one repeated token.
    CHECK(std::set<int32_t>(a.begin(), a.end()).size() > 2);
}

TEST_CASE("forced dense mode on a sparse file matches sparse inference with an exact predictor") {
    const std::string path = model_file("sparse.gguf", true);
    load_options dense;
    dense.force_dense = true;
    const auto a = model::load(path, load_options{});
    const auto b = model::load(path, dense);
    CHECK(greedy(*a, 1, 10) == greedy(*b, 1, 10));
}

TEST_CASE("a noisy predictor changes the logits") {
    const auto noisy = model::load(model_file("noisy.gguf", true, 0.5f), load_options{});
    const auto dense = model::load(model_file("dense.gguf", false), load_options{});
    const auto la = last_logits(*noisy), lb = last_logits(*dense);
    CHECK(max_abs_diff(la, lb) > 1e-2f * max_abs(lb));
}

TEST_CASE("greedy generation is deterministic across runs and thread counts") {
    const auto m = model::load(model_file("sparse16.gguf", true, 0.0f, true), load_options{});
    const auto a = greedy(*m, 1, 10);
    CHECK(a == greedy(*m, 1, 10));
    CHECK(a == greedy(*m, 2, 10));
}

TEST_CASE("batched prompt processing gives the logits of token-by-token decoding") {
    for (bool sparse : {true, false}) {
        const auto m =
            model::load(model_file(sparse ? "sparse.gguf" : "dense.gguf", sparse), load_options{});
        context_options co;
        co.n_ctx = 32;
        co.kv_f16 = false;
        context batched(*m, co), stepwise(*m, co);
        const std::vector<int8_t> all(prompt.size(), 1);
        batched.decode(batch_view{prompt, {}, all});
        for (size_t i = 0; i < prompt.size(); ++i) {
            const int32_t one[1] = {prompt[i]};
            stepwise.decode(batch_view{one, {}, {}});
            const auto a = batched.logits(static_cast<int32_t>(i));
            const auto b = stepwise.logits(-1);
            REQUIRE(a.size() == b.size());
            const std::vector<float> bv(b.begin(), b.end());
            CHECK(max_abs_diff(a, b) <= 1e-4f * max_abs(bv));
        }
    }
}

TEST_CASE("the sparse path computes about a tenth of the FFN neurons") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context ctx(*m, context_options{});
    ctx.decode(batch_view{prompt, {}, {}});
    const run_stats& s = ctx.stats();
    REQUIRE(s.ffn_total_neurons > 0);
    const double frac =
        static_cast<double>(s.ffn_active_neurons) / static_cast<double>(s.ffn_total_neurons);
    CHECK(frac > 0.03);
    CHECK(frac < 0.2);
    CHECK(s.n_prompt_tokens == prompt.size());
}

TEST_CASE("bad batches are rejected with a reason and leave the context usable") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context_options co;
    co.n_ctx = 8;
    co.n_batch = 4;
    context ctx(*m, co);
    const std::vector<int32_t> bad_token = {1, 4096};
    CHECK_THROWS_WITH_AS(ctx.decode(batch_view{bad_token, {}, {}}), doctest::Contains("4096"),
                         error);
    const std::vector<int32_t> five = {1, 2, 3, 4, 5};
    CHECK_THROWS_WITH_AS(ctx.decode(batch_view{five, {}, {}}), doctest::Contains("n_batch"), error);
    const std::vector<int32_t> two = {1, 2};
    const std::vector<int32_t> far = {7, 8};
    try {
        ctx.decode(batch_view{two, far, {}});
        FAIL("position 8 must not fit in n_ctx 8");
    } catch (const error& e) {
        CHECK(e.code() == status::context_full);
    }
    const std::vector<int32_t> same = {3, 3};
    CHECK_THROWS_AS(ctx.decode(batch_view{two, same, {}}), error);
    ctx.decode(batch_view{two, {}, {}});
    CHECK(ctx.n_past() == 2);
    CHECK(!ctx.logits(-1).empty());
    CHECK(ctx.logits(0).empty());
}

TEST_CASE("absurd context options are rejected") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context_options zero_ctx;
    zero_ctx.n_ctx = 0;
    CHECK_THROWS_AS(context(*m, zero_ctx), error);
    context_options negative_threads;
    negative_threads.n_threads = -2;
    CHECK_THROWS_WITH_AS(context(*m, negative_threads), doctest::Contains("n_threads"), error);
    context_options zero_batch;
    zero_batch.n_batch = 0;
    CHECK_THROWS_AS(context(*m, zero_batch), error);
}

TEST_CASE("cancelling a decode forgets its positions, and the next decode works") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context ctx(*m, context_options{});
    ctx.decode(batch_view{std::span<const int32_t>(prompt.data(), 4), {}, {}});
    ctx.cancel();
    try {
        ctx.decode(batch_view{std::span<const int32_t>(prompt.data() + 4, 4), {}, {}});
        FAIL("decode should have been cancelled");
    } catch (const error& e) {
        CHECK(e.code() == status::cancelled);
    }
    CHECK(ctx.n_past() == 4);
    ctx.clear_cancel();
    ctx.decode(batch_view{std::span<const int32_t>(prompt.data() + 4, 4), {}, {}});
    CHECK(ctx.n_past() == 8);
}

TEST_CASE("truncating the cache and decoding again reproduces the logits") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context_options co;
    co.kv_f16 = false;
    context ctx(*m, co);
    ctx.decode(batch_view{prompt, {}, {}});
    const auto first = std::vector<float>(ctx.logits(-1).begin(), ctx.logits(-1).end());
    ctx.truncate(4);
    CHECK(ctx.n_past() == 4);
    ctx.decode(batch_view{std::span<const int32_t>(prompt.data() + 4, 4), {}, {}});
    CHECK(max_abs_diff(first, ctx.logits(-1)) <= 1e-5f * max_abs(first));
}

TEST_CASE("complete_utf8_prefix holds back an unfinished character") {
    CHECK(complete_utf8_prefix("abc") == 3);
    CHECK(complete_utf8_prefix("a\xE2\x96") == 1);
    CHECK(complete_utf8_prefix("a\xE2\x96\x81") == 4);
    CHECK(complete_utf8_prefix("\xF0\x9F\x98") == 0);
    CHECK(complete_utf8_prefix("\xF0\x9F\x98\x80") == 4);
    CHECK(complete_utf8_prefix("") == 0);
}

TEST_CASE("generate stops at max tokens, at a stop string and when the callback says so") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context ctx(*m, context_options{});
    sampler_options greedy;
    greedy.temperature = 0.0f;
    sampler smp(greedy);
    generate_options o;
    o.max_tokens = 6;
    std::string text;
    o.on_text = [](const char* t, size_t n, void* u) {
        static_cast<std::string*>(u)->append(t, n);
        return true;
    };
    o.user_data = &text;
    const generate_result r = generate(ctx, smp, "Once upon a time", o);
    CHECK(r.reason == stop_reason::max_tokens);
    CHECK(r.n_generated_tokens == 6);
    CHECK(r.n_prompt_tokens ==
          static_cast<int32_t>(m->vocab().encode("Once upon a time", true).size()));
    REQUIRE(text.size() > 2);

    // A stop string taken from the middle of the greedy text ends generation before it.
    const std::string stop = text.substr(text.size() / 2, 2);
    std::string stopped;
    o.stop = {stop};
    o.user_data = &stopped;
    const generate_result r2 = generate(ctx, smp, "Once upon a time", o);
    CHECK(r2.reason == stop_reason::stop_string);
    CHECK(stopped == text.substr(0, text.find(stop)));

    o.stop.clear();
    int calls = 0;
    o.on_text = [](const char*, size_t, void* u) {
        ++*static_cast<int*>(u);
        return false;
    };
    o.user_data = &calls;
    const generate_result r3 = generate(ctx, smp, "Once upon a time", o);
    CHECK(r3.reason == stop_reason::callback);
    CHECK(calls == 1);
}

TEST_CASE("a prompt longer than the context is refused") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context_options co;
    co.n_ctx = 4;
    context ctx(*m, co);
    try {
        sampler smp{sampler_options{}};
        generate(ctx, smp, "this prompt certainly has more than four tokens in it",
                 generate_options{});
        FAIL("expected context_full");
    } catch (const error& e) {
        CHECK(e.code() == status::context_full);
    }
}

TEST_CASE("cancel from another thread stops a long generation") {
    const auto m = model::load(model_file("sparse.gguf", true), load_options{});
    context_options co;
    co.n_ctx = 256;
    context ctx(*m, co);
    struct shared_state {
        std::atomic<int> pieces{0};
        std::atomic<bool> cancel_sent{false};
    } state;
    sampler_options greedy;
    greedy.temperature = 0.0f;
    sampler smp(greedy);
    generate_options o;
    o.max_tokens = 1 << 20;
    // The third piece waits until the other thread has cancelled, so the test does not race.
    o.on_text = [](const char*, size_t, void* u) {
        auto* st = static_cast<shared_state*>(u);
        if (++st->pieces == 3)
            while (!st->cancel_sent.load())
                std::this_thread::yield();
        return true;
    };
    o.user_data = &state;
    std::thread canceller([&] {
        while (state.pieces.load() < 3)
            std::this_thread::yield();
        ctx.cancel();
        state.cancel_sent = true;
    });
    const generate_result r = generate(ctx, smp, "Hello", o);
    canceller.join();
    CHECK(r.reason == stop_reason::cancelled);
    CHECK(r.n_generated_tokens >= 3);
}

TEST_CASE(
    "the predictor audit reports perfect recall for the exact predictor and less for a noisy one") {
    context_options co;
    co.audit_predictor = true;
    const auto exact = model::load(model_file("sparse.gguf", true), load_options{});
    context c1(*exact, co);
    c1.decode(batch_view{prompt, {}, {}});
    REQUIRE(c1.audits().size() == 2);
    for (const predictor_audit& a : c1.audits()) {
        CHECK(a.tokens == prompt.size());
        REQUIRE(a.true_active > 0);
        CHECK(a.true_positive == a.true_active);
        CHECK(static_cast<double>(a.true_positive) / static_cast<double>(a.predicted_active) >
              0.99);
    }
    const auto noisy = model::load(model_file("noisy.gguf", true, 0.5f), load_options{});
    context c2(*noisy, co);
    c2.decode(batch_view{prompt, {}, {}});
    uint64_t tp = 0, truly = 0;
    for (const predictor_audit& a : c2.audits()) {
        tp += a.true_positive;
        truly += a.true_active;
    }
    CHECK(static_cast<double>(tp) / static_cast<double>(truly) < 0.99);
}

TEST_CASE("decode statistics count the bytes a sparse token reads, fewer than a dense one") {
    const std::string path = model_file("sparse.gguf", true);
    load_options dense;
    dense.force_dense = true;
    const auto ms = model::load(path, load_options{});
    const auto md = model::load(path, dense);
    context cs(*ms, context_options{}), cd(*md, context_options{});
    for (context* c : {&cs, &cd}) {
        c->decode(batch_view{std::span<const int32_t>(prompt.data(), 4), {}, {}});
        for (size_t i = 4; i < prompt.size(); ++i)
            c->decode(batch_view{std::span<const int32_t>(&prompt[i], 1), {}, {}});
        CHECK(c->stats().n_decode_tokens == 4);
        CHECK(c->stats().decode_bytes > 0);
    }
    CHECK(cs.stats().decode_bytes < cd.stats().decode_bytes);
}

namespace {

// The bytes of weights and KV cache the decode steps after a 4-token prompt would read if every
// row of ffn_down_t were read (step k sees 5 + k cache cells), with the predictor's when
// `predictor`; and, through down_t, what ffn_down_t contributes to that.
uint64_t every_row_bytes(const model& m, bool predictor, uint64_t& down_t) {
    auto bytes = [](const pib_tensor& t) { return static_cast<uint64_t>(t.nb1) * t.ne1; };
    const hparams& h = m.hp();
    uint64_t every_row = 0;
    down_t = 0;
    for (uint64_t cells = 5; cells <= prompt.size(); ++cells) {
        every_row += bytes(m.output()) + bytes(m.output_norm()) + m.token_embd().nb1;
        for (const layer_weights& w : m.layers()) {
            every_row += bytes(w.attn_norm) + bytes(w.wq) + bytes(w.wk) + bytes(w.wv) +
                         bytes(w.wo) + 2 * cells * row_bytes(ggml_type::f16, h.n_embd_kv()) +
                         bytes(w.ffn_norm) + bytes(w.up) + bytes(w.gate) + bytes(w.down_t);
            if (predictor) every_row += bytes(w.fc1) + bytes(w.fc2);
            down_t += bytes(w.down_t);
        }
    }
    return every_row;
}

} // namespace

TEST_CASE("a dense decode step on a sparse file counts only the ffn_down_t rows with a nonzero "
          "activation") {
    load_options dense;
    dense.force_dense = true;
    const auto md = model::load(model_file("sparse.gguf", true), dense);
    context cd(*md, context_options{});
    cd.decode(batch_view{std::span<const int32_t>(prompt.data(), 4), {}, {}});
    for (size_t i = 4; i < prompt.size(); ++i)
        cd.decode(batch_view{std::span<const int32_t>(&prompt[i], 1), {}, {}});
    uint64_t down_t = 0;
    const uint64_t every_row = every_row_bytes(*md, false, down_t);
    // The ReLU zeroes most activations, and the accumulate skips their rows.
    CHECK(cd.stats().decode_bytes < every_row - down_t / 2);
    CHECK(cd.stats().decode_bytes > every_row - down_t);
}

TEST_CASE("a sparse decode step counts only the listed ffn_down_t rows with a nonzero activation") {
    // A threshold below every predictor output lists every neuron: the up and gate rows are all
    // read, but the accumulate skips the rows the ReLU zeroed.
    load_options all_listed;
    all_listed.override_threshold = true;
    all_listed.sparse_threshold = -std::numeric_limits<float>::infinity();
    const auto ms = model::load(model_file("sparse.gguf", true), all_listed);
    context cs(*ms, context_options{});
    cs.decode(batch_view{std::span<const int32_t>(prompt.data(), 4), {}, {}});
    const run_stats after_prompt = cs.stats();
    for (size_t i = 4; i < prompt.size(); ++i)
        cs.decode(batch_view{std::span<const int32_t>(&prompt[i], 1), {}, {}});
    CHECK(cs.stats().ffn_active_neurons == cs.stats().ffn_total_neurons);
    uint64_t down_t = 0;
    const uint64_t every_row = every_row_bytes(*ms, true, down_t);
    CHECK(after_prompt.decode_bytes == 0);
    CHECK(cs.stats().decode_bytes < every_row - down_t / 2);
    CHECK(cs.stats().decode_bytes > every_row - down_t);
}

TEST_CASE("Q8_0 and Q4_0 models from pi_model_quantize run and stay close to the F32 logits") {
    const std::string f32 = model_file("sparse.gguf", true);
    const auto reference = last_logits(*model::load(f32, load_options{}));
    const float scale = max_abs(reference);
    for (auto [type, tolerance] :
         {std::pair{ggml_type::q8_0, 0.05f}, std::pair{ggml_type::q4_0, 0.5f}}) {
        CAPTURE(static_cast<int>(type));
        quantize_options q;
        q.target = parse_quantize_type(traits_of(type).name); // PowerInfer's mix
        const std::string out = f32 + (type == ggml_type::q8_0 ? ".q8_0" : ".q4_0");
        quantize_model(f32, out, q);
        const auto m = model::load(out, load_options{});
        CHECK(m->ffn_type() == type);
        const auto l = last_logits(*m);
        CHECK(max_abs_diff(l, reference) <= tolerance * scale);
        CHECK(max_abs_diff(l, reference) > 0.0f);
    }
}

TEST_CASE("K-quant files (PowerInfer's default Q4_0 mix with its Q6_K output, Q4_K_M, Q6_K, "
          "Q3_K_M) run sparse and dense close to the F32 logits, alike at 1 and 2 threads") {
    static const std::string dir = test::scratch_dir("engine-kquant");
    synth_options o = test::tiny_model_options(true);
    o.n_embd = 256; // K-quant rows are whole super-blocks of 256
    o.n_ff = 512;
    const std::string f32 = test::write_tiny_model(dir, "sparse-256.gguf", o);
    const auto reference = last_logits(*model::load(f32, load_options{}));
    const float scale = max_abs(reference);
    struct case_t {
        const char* target;
        ggml_type output, ffn;
        float tolerance;
    };
    for (const case_t& c : {case_t{"Q4_0", ggml_type::q6_k, ggml_type::q4_0, 0.35f},
                           case_t{"Q4_K_M", ggml_type::q6_k, ggml_type::q4_k, 0.3f},
                           case_t{"Q6_K", ggml_type::q6_k, ggml_type::q6_k, 0.08f},
                           case_t{"Q3_K_M", ggml_type::q6_k, ggml_type::q3_k, 0.6f}}) {
        const std::string target = c.target;
        CAPTURE(target);
        quantize_options q;
        q.target = parse_quantize_type(c.target);
        const std::string out = f32 + "." + c.target;
        quantize_model(f32, out, q);
        const auto m = model::load(out, load_options{});
        CHECK(m->output().type == static_cast<uint32_t>(c.output));
        CHECK(m->ffn_type() == c.ffn);
        const auto l = last_logits(*m);
        CHECK(max_abs_diff(l, reference) <= c.tolerance * scale);
        CHECK(max_abs_diff(l, reference) > 0.0f);
        // The predictor was made for the F32 weights (and is quantized too), so the sparse run
        // is held to the F32 logits, as the dense run of the same file is.
        load_options dense;
        dense.force_dense = true;
        const auto d = model::load(out, dense);
        CHECK(max_abs_diff(last_logits(*d), reference) <= c.tolerance * scale);
        CHECK(greedy(*m, 1, 8) == greedy(*m, 2, 8));
    }
}
