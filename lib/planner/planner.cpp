// Placement: dense groups in PowerInfer's priority order, then the KV cache, then hot neurons by a
// global greedy over per-layer chunks (docs/planner.md explains why greedy is the solver's answer).
#include "planner/planner.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "support/error.hpp"
#include "support/log.hpp"

namespace pi::planner {

namespace {

uint64_t mul_checked(uint64_t a, uint64_t b, const char* what) {
    uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        fail(status::invalid_argument, "planner: ", what, " overflows 64 bits");
    return r;
}

uint64_t align_up(uint64_t n, uint32_t alignment, const char* what) {
    const uint64_t mask = uint64_t{alignment} - 1;
    if (n > UINT64_MAX - mask)
        fail(status::invalid_argument, "planner: ", what, " overflows 64 bits");
    return (n + mask) & ~mask;
}

void validate(const plan_input& in) {
    if (in.alignment == 0 || (in.alignment & (in.alignment - 1)) != 0)
        fail(status::invalid_argument, "planner: alignment ", in.alignment,
             " is not a power of two");
    if (in.neuron_granularity < 1)
        fail(status::invalid_argument, "planner: neuron_granularity ", in.neuron_granularity,
             " must be at least 1");
    const size_t n_layer = in.layers.size();
    if (!in.frequencies.empty() && in.frequencies.size() != n_layer)
        fail(status::invalid_argument, "planner: frequencies cover ", in.frequencies.size(),
             " layers, the model has ", n_layer);
    for (size_t l = 0; l < n_layer; ++l) {
        const layer_geometry& g = in.layers[l];
        if (g.n_ff < 0)
            fail(status::invalid_argument, "planner: layer ", l, ": n_ff ", g.n_ff, " is negative");
        if (g.n_ff > 0 && g.neuron_bytes == 0)
            fail(status::invalid_argument, "planner: layer ", l, ": neuron_bytes is 0 with n_ff ",
                 g.n_ff);
        align_up(g.attn_bytes, in.alignment, "attention bytes");
        align_up(g.predictor_bytes, in.alignment, "predictor bytes");
        align_up(g.ffn_norm_bytes, in.alignment, "ffn norm bytes");
        ffn_layer_bytes(g, g.n_ff, in.alignment);
        if (in.frequencies.empty()) continue;
        const std::vector<float>& f = in.frequencies[l];
        if (f.size() != static_cast<size_t>(g.n_ff))
            fail(status::invalid_argument, "planner: layer ", l, ": ", f.size(),
                 " frequencies for n_ff ", g.n_ff);
        for (size_t i = 0; i < f.size(); ++i)
            if (!std::isfinite(f[i]) || f[i] < 0.0f)
                fail(status::invalid_argument, "planner: layer ", l, ": frequency of neuron ", i,
                     " is ", f[i], ", expected a finite value >= 0");
    }
    align_up(in.output_bytes, in.alignment, "output bytes");
    mul_checked(align_up(in.kv_bytes_per_layer, in.alignment, "KV bytes"), n_layer,
                "KV cache bytes");
    align_up(in.scratch_bytes, in.alignment, "scratch bytes");
}

plan cpu_plan(const plan_input& in) {
    const size_t n_layer = in.layers.size();
    plan p;
    p.attn_on_device.assign(n_layer, false);
    p.predictor_on_device.assign(n_layer, false);
    p.ffn_norm_on_device.assign(n_layer, false);
    p.hot.assign(n_layer, {});
    p.n_ff.reserve(n_layer);
    for (const layer_geometry& g : in.layers)
        p.n_ff.push_back(g.n_ff);
    p.budget = in.budget;
    return p;
}

// Places scratch and the dense groups; returns whether every dense group fit. `left` is the
// budget that remains.
bool place_dense(const plan_input& in, plan& p, uint64_t& left) {
    const uint64_t scratch = align_up(in.scratch_bytes, in.alignment, "scratch bytes");
    if (scratch > in.budget)
        fail(status::out_of_memory, "planner: the device budget of ", in.budget,
             " bytes cannot hold the ", scratch, " bytes of device scratch (", scratch - in.budget,
             " bytes short)");
    p.bytes_scratch = scratch;
    left = in.budget - scratch;

    bool all_fit = true;
    // Whether the group goes to the device; an unsupported group stays on the CPU, and after a
    // group that did not fit nothing more is placed.
    const auto take = [&](bool supported, uint64_t bytes, uint64_t& category) {
        if (!supported || !all_fit) return false;
        const uint64_t size = align_up(bytes, in.alignment, "group bytes");
        if (size > left) return all_fit = false;
        left -= size;
        category += size;
        return true;
    };
    const size_t n_layer = in.layers.size();
    for (size_t l = 0; l < n_layer; ++l)
        p.attn_on_device[l] =
            take(in.layers[l].attn_supported, in.layers[l].attn_bytes, p.bytes_attn);
    for (size_t l = 0; l < n_layer; ++l)
        p.predictor_on_device[l] =
            take(in.layers[l].predictor_supported, in.layers[l].predictor_bytes, p.bytes_predictor);
    for (size_t l = 0; l < n_layer; ++l)
        p.ffn_norm_on_device[l] =
            take(in.layers[l].ffn_norm_supported, in.layers[l].ffn_norm_bytes, p.bytes_ffn_norm);
    p.output_on_device = take(in.output_supported, in.output_bytes, p.bytes_output);
    return all_fit;
}

void place_kv(const plan_input& in, plan& p, uint64_t& left) {
    const uint64_t kv =
        align_up(in.kv_bytes_per_layer, in.alignment, "KV bytes") * in.layers.size();
    if (kv > left) return;
    left -= kv;
    p.kv_on_device = true;
    p.bytes_kv = kv;
}

void finish_totals(plan& p) {
    p.bytes_dense = p.bytes_attn + p.bytes_predictor + p.bytes_ffn_norm + p.bytes_output;
    p.bytes_total = p.bytes_dense + p.bytes_kv + p.bytes_scratch + p.bytes_ffn;
}

// Neuron ids of one layer, hottest first; ties go to the lower id so that plans are reproducible.
std::vector<int32_t> by_frequency(const std::vector<float>& f) {
    std::vector<int32_t> order(f.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return f[a] > f[b]; });
    return order;
}

// Global greedy over chunks of `granularity` neurons taken from each layer's hottest-first order.
// A chunk's value is its activation mass per device byte; within a layer those values never
// increase, so the chunks taken form a prefix of each layer's order, and with equal neuron sizes
// this is PowerInfer's ILP answer (a knapsack with equal weights) at chunk size = granularity.
// A chunk that does not fit retires its layer: the budget only shrinks, so it never fits later.
void place_ffn(const plan_input& in, plan& p, uint64_t left) {
    const size_t n_layer = in.layers.size();
    const int32_t g = in.neuron_granularity;
    std::vector<std::vector<int32_t>> order(n_layer);
    std::vector<std::vector<double>> prefix(n_layer); // prefix[l][k] = mass of the k hottest
    std::vector<int32_t> taken(n_layer, 0);
    std::vector<uint64_t> cost(n_layer, 0);

    struct head {
        double density;
        size_t layer;
    };
    const auto lower = [](const head& a, const head& b) {
        return a.density != b.density ? a.density < b.density : a.layer > b.layer;
    };
    std::priority_queue<head, std::vector<head>, decltype(lower)> queue(lower);
    const auto chunk = [&](size_t l) { return std::min<int32_t>(g, in.layers[l].n_ff - taken[l]); };
    const auto push_next = [&](size_t l) {
        const int32_t k = taken[l];
        const int32_t len = chunk(l);
        if (len <= 0) return;
        const double mass = prefix[l][k + len] - prefix[l][k];
        queue.push(
            {mass / (static_cast<double>(len) * static_cast<double>(in.layers[l].neuron_bytes)),
             l});
    };

    for (size_t l = 0; l < n_layer; ++l) {
        const std::vector<float>& f = in.frequencies[l];
        order[l] = by_frequency(f);
        prefix[l].assign(f.size() + 1, 0.0);
        for (size_t i = 0; i < f.size(); ++i)
            prefix[l][i + 1] = prefix[l][i] + f[order[l][i]];
        if (in.layers[l].ffn_supported) push_next(l);
    }
    while (!queue.empty()) {
        const size_t l = queue.top().layer;
        queue.pop();
        const int32_t k = taken[l] + chunk(l);
        const uint64_t new_cost = ffn_layer_bytes(in.layers[l], k, in.alignment);
        if (new_cost - cost[l] > left) continue;
        left -= new_cost - cost[l];
        cost[l] = new_cost;
        taken[l] = k;
        push_next(l);
    }
    for (size_t l = 0; l < n_layer; ++l) {
        p.hot[l].assign(order[l].begin(), order[l].begin() + taken[l]);
        std::sort(p.hot[l].begin(), p.hot[l].end());
        p.bytes_ffn += cost[l];
    }
}

void check_hot_sets(const plan_input& in, const std::vector<std::vector<int32_t>>& hot) {
    if (hot.size() != in.layers.size())
        fail(status::invalid_argument, "planner: hot sets cover ", hot.size(),
             " layers, the model has ", in.layers.size());
    for (size_t l = 0; l < hot.size(); ++l) {
        const int32_t n_ff = in.layers[l].n_ff;
        for (size_t i = 0; i < hot[l].size(); ++i) {
            const int32_t id = hot[l][i];
            if (id < 0 || id >= n_ff)
                fail(status::invalid_argument, "planner: layer ", l, ": hot neuron id ", id,
                     " is outside 0..", n_ff - 1);
            if (i > 0 && id <= hot[l][i - 1])
                fail(status::invalid_argument, "planner: layer ", l,
                     ": hot neuron ids are not strictly ascending at position ", i);
        }
    }
}

} // namespace

uint64_t ffn_layer_bytes(const layer_geometry& layer, int32_t k, uint32_t alignment) {
    if (k <= 0) return 0;
    const uint64_t rows = mul_checked(static_cast<uint64_t>(k), layer.neuron_bytes, "FFN bytes");
    return align_up(rows, alignment, "FFN bytes") +
           align_up(static_cast<uint64_t>(k) * sizeof(int32_t), alignment, "FFN bucket bytes");
}

plan make_plan(const plan_input& in) {
    validate(in);
    plan p = cpu_plan(in);
    if (in.budget == 0) return p;
    uint64_t left = 0;
    if (place_dense(in, p, left)) {
        place_kv(in, p, left);
        if (!in.frequencies.empty()) place_ffn(in, p, left);
    }
    finish_totals(p);
    return p;
}

std::optional<plan> make_plan_with_hot(const plan_input& in,
                                       const std::vector<std::vector<int32_t>>& hot) {
    validate(in);
    check_hot_sets(in, hot);
    plan p = cpu_plan(in);
    const bool any_hot =
        std::any_of(hot.begin(), hot.end(), [](const auto& h) { return !h.empty(); });
    if (in.budget == 0) {
        if (!any_hot) return p;
        log(log_level::info, "planner: cached hot neurons ignored: no device budget");
        return std::nullopt;
    }
    uint64_t left = 0;
    const bool dense_fit = place_dense(in, p, left);
    if (dense_fit) place_kv(in, p, left);
    if (any_hot && !dense_fit) {
        log(log_level::info,
            "planner: cached hot neurons ignored: the dense part does not fit the budget");
        return std::nullopt;
    }
    for (size_t l = 0; l < hot.size(); ++l) {
        const int32_t k = static_cast<int32_t>(hot[l].size());
        if (k > 0 && !in.layers[l].ffn_supported) {
            log(log_level::info,
                concat("planner: cached hot neurons ignored: the device cannot compute layer ", l,
                       "'s FFN weights"));
            return std::nullopt;
        }
        if (k != in.layers[l].n_ff && k % in.neuron_granularity != 0) {
            log(log_level::info,
                concat("planner: cached hot neurons ignored: layer ", l, " has ", k,
                       ", not a multiple of ", in.neuron_granularity, " nor the full layer"));
            return std::nullopt;
        }
        const uint64_t bytes = ffn_layer_bytes(in.layers[l], k, in.alignment);
        if (bytes > left) {
            log(log_level::info, concat("planner: cached hot neurons ignored: layer ", l, " needs ",
                                        bytes, " device bytes, ", left, " are left"));
            return std::nullopt;
        }
        left -= bytes;
        p.bytes_ffn += bytes;
        p.hot[l] = hot[l];
    }
    finish_totals(p);
    return p;
}

} // namespace pi::planner
