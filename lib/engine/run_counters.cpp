#include "engine/run_counters.hpp"

#include "engine/block_ops.hpp"

#include <algorithm>

namespace pi {

run_counters::run_counters(const model& m, int32_t n_batch, bool audit, bool count_activations)
    : model_(m), layer_active_(static_cast<size_t>(m.hp().n_layer), 0) {
    const auto layers = static_cast<size_t>(m.hp().n_layer);
    const auto ff = static_cast<size_t>(m.hp().n_ff);
    const size_t cells = static_cast<size_t>(n_batch) * ff;
    if (audit) {
        audits_.resize(layers);
        true_activations_.resize(cells);
        selected_.resize(ff);
    }
    if (audit || count_activations) lists_.resize(cells);
    if (count_activations) activation_counts_.assign(layers, std::vector<float>(ff, 0.0f));
}

void run_counters::add_batch(int32_t n_tokens, double seconds) noexcept {
    if (n_tokens == 1) {
        stats_.n_decode_tokens += 1;
        stats_.decode_seconds += seconds;
    } else {
        stats_.n_prompt_tokens += static_cast<uint64_t>(n_tokens);
        stats_.prompt_seconds += seconds;
    }
}

void run_counters::add_ffn(size_t il, int32_t n_tokens, uint64_t active) noexcept {
    stats_.ffn_active_neurons += active;
    layer_active_[il] += active;
    stats_.ffn_total_neurons +=
        static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(model_.hp().n_ff);
}

void run_counters::reset() noexcept {
    stats_ = {};
    std::fill(layer_active_.begin(), layer_active_.end(), 0);
    std::fill(audits_.begin(), audits_.end(), predictor_audit{});
}

void run_counters::add_lists(device& host, const arena& host_arena, size_t il, int32_t n,
                             std::span<const int32_t> counts) {
    if (!audits_.empty()) audit_layer(host, host_arena, il, n, counts);
    if (!activation_counts_.empty()) count_layer(host, host_arena, il, n, counts);
}

void run_counters::count_layer(device& host, const arena& host_arena, size_t il, int32_t n,
                               std::span<const int32_t> counts) {
    const pib_tensor& idx = host_arena.tensors().idx;
    std::vector<float>& selected = activation_counts_[il];
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const auto c = static_cast<size_t>(counts[tt]);
        host.download(host_arena.memory(), idx.offset + tt * idx.nb1, lists_.data(),
                      sizeof(int32_t) * c);
        for (size_t j = 0; j < c; ++j)
            selected[static_cast<size_t>(lists_[j])] += 1.0f;
    }
}

void run_counters::audit_layer(device& host, const arena& host_arena, size_t il, int32_t n,
                               std::span<const int32_t> counts) {
    const arena_tensors& a = host_arena.tensors();
    const layer_weights& w = model_.layers()[il];
    const auto ff = static_cast<size_t>(model_.hp().n_ff);
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n),
                     up = first_rows(a.audit_up, n), gate = first_rows(a.audit_gate, n);
    ffn_input(host, model_.hp(), w, x, xn);
    host.run("audit FFN up", &pib_vtable::mul_mat, &w.up, &xn, &up);
    if (present(w.gate)) host.run("audit FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &gate);
    ffn_activation(host, model_, w, gate, up);
    host.run("synchronize", &pib_vtable::synchronize);
    host.download(host_arena.memory(), a.audit_up.offset, true_activations_.data(),
                  sizeof(float) * ff * static_cast<size_t>(n));
    host.download(host_arena.memory(), a.idx.offset, lists_.data(),
                  sizeof(int32_t) * ff * static_cast<size_t>(n));
    predictor_audit& out = audits_[il];
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        std::fill(selected_.begin(), selected_.end(), 0);
        const int32_t count = counts[tt];
        for (int32_t k = 0; k < count; ++k)
            selected_[static_cast<size_t>(lists_[tt * ff + static_cast<size_t>(k)])] = 1;
        for (size_t i = 0; i < ff; ++i) {
            const bool truly = true_activations_[tt * ff + i] != 0.0f;
            out.true_active += truly;
            out.true_positive += truly && selected_[i];
        }
        out.predicted_active += static_cast<uint64_t>(count);
    }
    out.tokens += static_cast<uint64_t>(n);
}

} // namespace pi
