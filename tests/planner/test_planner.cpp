// The placement planner: priority order of dense groups, KV cache, global hot-neuron choice,
// rounding, alignment accounting and the budget invariant on random inputs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include <doctest/doctest.h>

#include "planner/planner.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using test::code_of;
using planner::layer_geometry;
using planner::make_plan;
using planner::plan;
using planner::plan_input;

// n_layer identical layers with unaligned-free sizes (alignment 1) unless changed by the caller.
plan_input uniform(int n_layer, int32_t n_ff, uint64_t budget) {
    plan_input in;
    in.layers.assign(static_cast<size_t>(n_layer), layer_geometry{1000, 100, 10, 6, n_ff});
    in.output_bytes = 5000;
    in.kv_bytes_per_layer = 400;
    in.scratch_bytes = 300;
    in.budget = budget;
    in.alignment = 1;
    in.neuron_granularity = 1;
    in.frequencies.assign(static_cast<size_t>(n_layer),
                          std::vector<float>(static_cast<size_t>(n_ff), 1.0f));
    return in;
}

uint64_t dense_bytes(const plan_input& in) {
    uint64_t b = in.output_bytes;
    for (const layer_geometry& g : in.layers)
        b += g.attn_bytes + g.predictor_bytes + g.ffn_norm_bytes;
    return b;
}

uint64_t align(uint64_t n, uint64_t a) {
    return (n + a - 1) / a * a;
}

// The bytes a plan claims, recomputed from its decisions with the documented allocation model.
uint64_t recount(const plan_input& in, const plan& p) {
    const uint64_t a = in.alignment;
    if (in.budget == 0) return 0;
    uint64_t b = align(in.scratch_bytes, a);
    for (size_t l = 0; l < in.layers.size(); ++l) {
        const layer_geometry& g = in.layers[l];
        if (p.attn_on_device[l]) b += align(g.attn_bytes, a);
        if (p.predictor_on_device[l]) b += align(g.predictor_bytes, a);
        if (p.ffn_norm_on_device[l]) b += align(g.ffn_norm_bytes, a);
        const uint64_t k = p.hot[l].size();
        if (k > 0) b += align(k * g.neuron_bytes, a) + align(k * 4, a);
    }
    if (p.output_on_device) b += align(in.output_bytes, a);
    if (p.kv_on_device) b += in.layers.size() * align(in.kv_bytes_per_layer, a);
    return b;
}

} // namespace

TEST_CASE("budget 0 puts everything on the CPU") {
    plan_input in = uniform(3, 64, 0);
    in.scratch_bytes = 1 << 20;
    const plan p = make_plan(in);
    CHECK(std::none_of(p.attn_on_device.begin(), p.attn_on_device.end(), [](bool b) { return b; }));
    CHECK(std::none_of(p.predictor_on_device.begin(), p.predictor_on_device.end(),
                       [](bool b) { return b; }));
    CHECK(std::none_of(p.ffn_norm_on_device.begin(), p.ffn_norm_on_device.end(),
                       [](bool b) { return b; }));
    CHECK_FALSE(p.output_on_device);
    CHECK_FALSE(p.kv_on_device);
    REQUIRE(p.hot.size() == 3);
    for (const auto& h : p.hot)
        CHECK(h.empty());
    CHECK(p.bytes_total == 0);
    CHECK(p.bytes_scratch == 0);
}

TEST_CASE("scratch that does not fit the budget is an error naming the shortfall") {
    plan_input in = uniform(2, 64, 1000);
    in.scratch_bytes = 1500;
    try {
        make_plan(in);
        FAIL("expected an error");
    } catch (const error& e) {
        CHECK(e.code() == status::out_of_memory);
        CHECK(std::string(e.what()).find("500 bytes short") != std::string::npos);
    }
}

TEST_CASE("dense groups go in priority order and stop at the first that does not fit") {
    // scratch 300 + attention 3x1000 + predictors: two of 100 fit, the third does not. The ffn
    // norms (10 bytes each) would still fit but come after the first miss.
    plan_input in = uniform(3, 64, 300 + 3000 + 250);
    const plan p = make_plan(in);
    CHECK(p.attn_on_device == std::vector<bool>{true, true, true});
    CHECK(p.predictor_on_device == std::vector<bool>{true, true, false});
    CHECK(p.ffn_norm_on_device == std::vector<bool>{false, false, false});
    CHECK_FALSE(p.output_on_device);
    CHECK_FALSE(p.kv_on_device);
    for (const auto& h : p.hot)
        CHECK(h.empty());
    CHECK(p.bytes_scratch == 300);
    CHECK(p.bytes_attn == 3000);
    CHECK(p.bytes_predictor == 200);
    CHECK(p.bytes_dense == 3200);
    CHECK(p.bytes_total == 3500);

    // Attention itself stops in the middle: layer 1 does not fit, so layer 2 is not tried.
    plan_input small = uniform(3, 64, 300 + 1500);
    small.layers[2].attn_bytes = 1;
    const plan q = make_plan(small);
    CHECK(q.attn_on_device == std::vector<bool>{true, false, false});
}

TEST_CASE("every allocation is rounded up to the alignment") {
    plan_input in = uniform(2, 64, 1 << 20);
    in.alignment = 256;
    in.scratch_bytes = 1;
    in.layers = {layer_geometry{257, 1, 1, 6, 64}, layer_geometry{256, 0, 1, 6, 64}};
    in.output_bytes = 10;
    in.kv_bytes_per_layer = 300;
    in.frequencies.assign(2, std::vector<float>(64, 1.0f));
    const plan p = make_plan(in);
    CHECK(p.bytes_scratch == 256);
    CHECK(p.bytes_attn == 512 + 256);
    CHECK(p.bytes_predictor == 256); // a 0-byte group allocates nothing
    CHECK(p.bytes_ffn_norm == 512);
    CHECK(p.bytes_output == 256);
    CHECK(p.bytes_kv == 2 * 512);
    // Both layers full: 64 * 6 = 384 -> 512 bytes of rows, 64 * 4 = 256 bytes of bucket.
    CHECK(p.bytes_ffn == 2 * (512 + 256));
    CHECK(p.bytes_total == recount(in, p));
    CHECK(planner::ffn_layer_bytes(in.layers[0], 0, 256) == 0);
    CHECK(planner::ffn_layer_bytes(in.layers[0], 1, 256) == 512);
}

TEST_CASE("the KV cache is placed only after every dense group, before the FFN") {
    plan_input in = uniform(2, 64, 0);
    const uint64_t dense = 300 + dense_bytes(in);
    in.budget = dense + 799; // KV needs 800
    plan p = make_plan(in);
    CHECK(p.output_on_device);
    CHECK_FALSE(p.kv_on_device);
    // The FFN still gets the remainder: it needs only the dense groups to fit (docs/planner.md).
    CHECK(p.bytes_ffn > 0);
    CHECK(p.bytes_total <= in.budget);

    in.budget = dense + 800;
    p = make_plan(in);
    CHECK(p.kv_on_device);
    CHECK(p.bytes_kv == 800);
    CHECK(p.bytes_ffn == 0);

    // The output misses by one byte: no KV cache although it would fit the rest.
    in.output_bytes = 900;
    in.budget = 300 + dense_bytes(in) - 1;
    p = make_plan(in);
    CHECK_FALSE(p.output_on_device);
    CHECK_FALSE(p.kv_on_device);
    CHECK(p.bytes_ffn == 0);
}

TEST_CASE("hot neurons are chosen globally: a hotter layer gets more") {
    plan_input in = uniform(2, 256, 0);
    in.kv_bytes_per_layer = 0;
    in.neuron_granularity = 32;
    for (size_t i = 0; i < 256; ++i) {
        in.frequencies[0][i] = 1000.0f - static_cast<float>(i);
        in.frequencies[1][i] = 100.0f - static_cast<float>(i) / 4.0f;
    }
    const uint64_t per_neuron = 6 + 4; // rows + bucket id at alignment 1
    in.budget = 300 + dense_bytes(in) + 128 * per_neuron;
    const plan p = make_plan(in);
    CHECK(p.hot[0].size() == 128);
    CHECK(p.hot[1].empty());

    // Half of layer 0 is cold: its hot half goes first, then layer 1's warm neurons.
    for (size_t i = 0; i < 256; ++i)
        in.frequencies[0][i] = i < 64 ? 1000.0f : 0.0f;
    const plan q = make_plan(in);
    CHECK(q.hot[0].size() == 64);
    CHECK(q.hot[1].size() == 64);
    for (size_t i = 0; i < 64; ++i)
        CHECK(q.hot[0][i] == static_cast<int32_t>(i));
}

TEST_CASE("each layer's hot set is its most frequent neurons in ascending id order") {
    plan_input in = uniform(1, 8, 0);
    in.kv_bytes_per_layer = 0;
    in.frequencies = {{5, 90, 1, 70, 80, 2, 60, 3}};
    in.budget = 300 + dense_bytes(in) + 4 * 10;
    const plan p = make_plan(in);
    CHECK(p.hot[0] == std::vector<int32_t>{1, 3, 4, 6});
}

TEST_CASE("hot counts are rounded down to the granularity, but a layer may be full") {
    plan_input in = uniform(2, 256, 0);
    in.kv_bytes_per_layer = 0;
    in.neuron_granularity = 32;
    in.budget = 300 + dense_bytes(in) + 100 * 10;
    plan p = make_plan(in);
    CHECK(p.hot[0].size() % 32 == 0);
    CHECK(p.hot[1].size() % 32 == 0);
    CHECK(p.hot[0].size() + p.hot[1].size() == 96);

    // n_ff = 100 is no multiple of 32: with enough budget the layer is simply full.
    plan_input odd = uniform(1, 100, 0);
    odd.kv_bytes_per_layer = 0;
    odd.neuron_granularity = 32;
    odd.budget = 300 + dense_bytes(odd) + 100 * 10;
    p = make_plan(odd);
    CHECK(p.hot[0].size() == 100);
    odd.budget -= 1; // one byte short of full: 96 neurons
    p = make_plan(odd);
    CHECK(p.hot[0].size() == 96);
}

TEST_CASE("without statistics the FFN stays on the CPU") {
    plan_input in = uniform(2, 64, 1 << 30);
    in.frequencies.clear();
    const plan p = make_plan(in);
    CHECK(p.kv_on_device);
    CHECK(p.bytes_ffn == 0);
    for (const auto& h : p.hot)
        CHECK(h.empty());
}

TEST_CASE("random inputs never exceed the budget and the byte accounting is exact") {
    std::mt19937_64 rng(20240601);
    int dense_stopped = 0, partial_layers = 0, full_layers = 0;
    const auto pick = [&](uint64_t lo, uint64_t hi) {
        return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
    };
    for (int iter = 0; iter < 400; ++iter) {
        plan_input in;
        const int n_layer = static_cast<int>(pick(0, 6));
        for (int l = 0; l < n_layer; ++l) {
            layer_geometry g;
            g.attn_bytes = pick(0, 5000);
            g.predictor_bytes = pick(0, 1000);
            g.ffn_norm_bytes = pick(0, 100);
            g.n_ff = static_cast<int32_t>(pick(0, 300));
            g.neuron_bytes = g.n_ff > 0 ? pick(1, 60) : pick(0, 60);
            in.layers.push_back(g);
        }
        in.output_bytes = pick(0, 8000);
        in.kv_bytes_per_layer = pick(0, 2000);
        in.scratch_bytes = pick(0, 3000);
        in.alignment = static_cast<uint32_t>(1u << pick(0, 9));
        in.neuron_granularity = static_cast<int32_t>(pick(1, 64));
        if (pick(0, 4) != 0) {
            for (const layer_geometry& g : in.layers) {
                std::vector<float> f(static_cast<size_t>(g.n_ff));
                for (float& x : f)
                    x = pick(0, 3) == 0 ? 0.0f : static_cast<float>(pick(0, 1000000)) / 7.0f;
                in.frequencies.push_back(std::move(f));
            }
        }
        in.budget = pick(0, 3) == 0 ? 0 : pick(0, 60000);
        INFO("iteration " << iter);

        plan p;
        try {
            p = make_plan(in);
        } catch (const error& e) {
            CHECK(e.code() == status::out_of_memory);
            CHECK(align(in.scratch_bytes, in.alignment) > in.budget);
            continue;
        }
        CHECK(p.bytes_total <= in.budget);
        CHECK(p.bytes_total == recount(in, p));
        CHECK(p.bytes_total == p.bytes_dense + p.bytes_kv + p.bytes_scratch + p.bytes_ffn);
        CHECK(p.bytes_dense ==
              p.bytes_attn + p.bytes_predictor + p.bytes_ffn_norm + p.bytes_output);

        // Dense groups on the device form a prefix of the priority order.
        std::vector<bool> order;
        order.insert(order.end(), p.attn_on_device.begin(), p.attn_on_device.end());
        order.insert(order.end(), p.predictor_on_device.begin(), p.predictor_on_device.end());
        order.insert(order.end(), p.ffn_norm_on_device.begin(), p.ffn_norm_on_device.end());
        order.push_back(p.output_on_device);
        CHECK(std::is_partitioned(order.begin(), order.end(), [](bool b) { return b; }));
        const bool dense_complete = in.budget > 0 && p.output_on_device;
        if (!dense_complete) CHECK_FALSE(p.kv_on_device);
        if (in.budget > 0 && !dense_complete) ++dense_stopped;

        const uint64_t left = in.budget - p.bytes_total;
        for (size_t l = 0; l < in.layers.size(); ++l) {
            const std::vector<int32_t>& hot = p.hot[l];
            const layer_geometry& g = in.layers[l];
            const auto k = static_cast<int32_t>(hot.size());
            if (!dense_complete || in.frequencies.empty()) {
                CHECK(hot.empty());
                continue;
            }
            CHECK((k == g.n_ff || k % in.neuron_granularity == 0));
            partial_layers += k > 0 && k < g.n_ff;
            full_layers += k > 0 && k == g.n_ff;
            CHECK(std::is_sorted(hot.begin(), hot.end()));
            CHECK(std::adjacent_find(hot.begin(), hot.end()) == hot.end());
            // The hot set holds the layer's most frequent neurons.
            const std::vector<float>& f = in.frequencies[l];
            float coldest_hot = std::numeric_limits<float>::infinity();
            for (int32_t id : hot)
                coldest_hot = std::min(coldest_hot, f[static_cast<size_t>(id)]);
            float hottest_cold = -1.0f;
            for (int32_t i = 0; i < g.n_ff; ++i)
                if (!std::binary_search(hot.begin(), hot.end(), i))
                    hottest_cold = std::max(hottest_cold, f[static_cast<size_t>(i)]);
            CHECK(hottest_cold <= coldest_hot);
            // Maximal: the layer's next chunk does not fit what is left.
            if (k < g.n_ff) {
                const int32_t next = std::min(g.n_ff, k + in.neuron_granularity);
                CHECK(planner::ffn_layer_bytes(g, next, in.alignment) -
                          planner::ffn_layer_bytes(g, k, in.alignment) >
                      left);
            }
        }
    }
    // The random cases reach every regime.
    CHECK(dense_stopped > 20);
    CHECK(partial_layers > 20);
    CHECK(full_layers > 20);
}

TEST_CASE("inconsistent planner input is rejected") {
    const auto rejected = [](const std::function<void(plan_input&)>& edit) {
        plan_input in = uniform(2, 16, 1 << 20);
        edit(in);
        return code_of([&] { make_plan(in); }) == status::invalid_argument;
    };
    CHECK(rejected([](plan_input& in) { in.frequencies.pop_back(); }));
    CHECK(rejected([](plan_input& in) { in.frequencies[1].push_back(1.0f); }));
    CHECK(rejected([](plan_input& in) { in.frequencies[0][3] = -1.0f; }));
    CHECK(rejected([](plan_input& in) { in.frequencies[0][3] = std::nanf(""); }));
    CHECK(rejected(
        [](plan_input& in) { in.frequencies[0][3] = std::numeric_limits<float>::infinity(); }));
    CHECK(rejected([](plan_input& in) { in.alignment = 0; }));
    CHECK(rejected([](plan_input& in) { in.alignment = 48; }));
    CHECK(rejected([](plan_input& in) { in.neuron_granularity = 0; }));
    CHECK(rejected([](plan_input& in) {
        in.layers[0].n_ff = -1;
        in.frequencies.clear();
    }));
    CHECK(rejected([](plan_input& in) { in.layers[1].neuron_bytes = 0; }));
    CHECK(rejected([](plan_input& in) {
        in.alignment = 256;
        in.layers[0].attn_bytes = UINT64_MAX;
    }));
    CHECK(rejected([](plan_input& in) { in.layers[0].neuron_bytes = UINT64_MAX / 4; }));
    CHECK(rejected([](plan_input& in) { in.kv_bytes_per_layer = UINT64_MAX / 2 + 1; }));
}

TEST_CASE("cached hot sets are applied when they fit and refused when they do not") {
    plan_input in = uniform(2, 64, 0);
    in.neuron_granularity = 32;
    in.kv_bytes_per_layer = 0;
    in.budget = 300 + dense_bytes(in) + 96 * 10;
    const plan solved = make_plan(in);
    const auto again = planner::make_plan_with_hot(in, solved.hot);
    REQUIRE(again.has_value());
    CHECK(again->hot == solved.hot);
    CHECK(again->bytes_total == solved.bytes_total);

    std::vector<std::vector<int32_t>> all(2);
    for (int32_t i = 0; i < 64; ++i) {
        all[0].push_back(i);
        all[1].push_back(i);
    }
    CHECK_FALSE(planner::make_plan_with_hot(in, all).has_value()); // 128 neurons, room for 96

    std::vector<std::vector<int32_t>> odd = {{1, 2, 3}, {}};
    CHECK_FALSE(planner::make_plan_with_hot(in, odd).has_value()); // 3 is no multiple of 32

    const plan_input no_stats = [&] {
        plan_input c = in;
        c.frequencies.clear();
        return c;
    }();
    CHECK(planner::make_plan_with_hot(no_stats, solved.hot).has_value());

    std::vector<std::vector<int32_t>> bad = {{5, 4}, {}};
    CHECK(code_of([&] { planner::make_plan_with_hot(in, bad); }) == status::invalid_argument);
    bad = {{64}, {}};
    CHECK(code_of([&] { planner::make_plan_with_hot(in, bad); }) == status::invalid_argument);
    bad = {{}};
    CHECK(code_of([&] { planner::make_plan_with_hot(in, bad); }) == status::invalid_argument);

    plan_input tight = in;
    tight.budget = 300 + 100; // dense part does not fit
    CHECK_FALSE(planner::make_plan_with_hot(tight, solved.hot).has_value());
    tight.budget = 0;
    CHECK_FALSE(planner::make_plan_with_hot(tight, solved.hot).has_value());
    CHECK(planner::make_plan_with_hot(tight, {{}, {}}).has_value());
}

TEST_CASE("describe reports every category and the hot neurons per layer") {
    plan_input in = uniform(2, 64, 1 << 20);
    in.frequencies[1].assign(64, 0.0f);
    const std::string text = planner::describe(make_plan(in));
    for (const char* part : {"scratch", "attention", "predictors", "ffn norms", "output",
                             "kv cache", "ffn hot", "MiB", "0:64/64", "1:64/64", "(2/2 layers)"})
        CHECK_MESSAGE(text.find(part) != std::string::npos, part, "\n", text);
}

TEST_CASE("groups the device cannot compute stay on the CPU without ending the dense placement") {
    plan_input in = uniform(3, 64, 1000000);
    in.layers[1].predictor_supported = false; // e.g. a Q5_0 predictor on a GPU without Q5_0
    in.layers[2].ffn_supported = false;
    in.output_supported = false;
    const plan p = make_plan(in);
    CHECK(p.attn_on_device == std::vector<bool>{true, true, true});
    CHECK(p.predictor_on_device == std::vector<bool>{true, false, true});
    CHECK(p.ffn_norm_on_device == std::vector<bool>{true, true, true});
    CHECK_FALSE(p.output_on_device);
    CHECK(p.kv_on_device);
    CHECK(p.hot[0].size() == 64);
    CHECK(p.hot[1].size() == 64);
    CHECK(p.hot[2].empty());
    CHECK(p.bytes_predictor == 2 * 100);
    CHECK(p.bytes_output == 0);
    CHECK(recount(in, p) == p.bytes_total);

    // A cached plan with hot neurons in a layer the device cannot compute is not reused.
    std::vector<std::vector<int32_t>> hot(3);
    hot[2] = {0, 1, 2, 3};
    CHECK_FALSE(make_plan_with_hot(in, hot).has_value());
    hot[2].clear();
    hot[0] = {0, 1, 2, 3};
    CHECK(make_plan_with_hot(in, hot).has_value());
}
