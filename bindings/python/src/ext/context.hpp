#pragma once
// powerinfer._powerinfer._Context: a pi_context plus the binding's logits buffer.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "generation.hpp"
#include "model.hpp"
#include "sampler.hpp"
#include "state.hpp"

namespace pi::python {

class context {
  public:
    context(const model& m, int32_t n_ctx, int32_t n_batch, std::optional<int32_t> n_threads,
            uint32_t seed, bool kv_f16, int32_t n_seq_max);

    // The live state; ValueError once closed.
    std::shared_ptr<context_state> state() const;
    // Cancels what runs on the context; the memory goes when the last user lets go of it.
    void close();
    bool closed() const noexcept { return !state_; }
    void cancel();

    // Decodes tokens after the cached ones, in n_batch chunks, keeping the last token's logits.
    void eval(const std::vector<int32_t>& tokens);
    // Read-only float32 view of the binding's copy of the last eval()'s logits.
    pybind11::array_t<float> logits() const;
    std::unique_ptr<generation> start(std::string prompt, const generate_args& args,
                                      size_t capacity);

    int32_t n_ctx() const;
    int32_t n_past() const;
    void truncate(int32_t pos);
    // Clears the cache and decodes tokens from position 0, filling per layer and token the FFN
    // input [n_layer][n][n_embd], the active mask [n_layer][n][n_ff] and, when asked, the
    // activations; returns (inputs, active, activations or None).
    pybind11::tuple trace_ffn(const pybind11::array_t<int32_t, pybind11::array::c_style>& tokens,
                              bool with_activations);
    pybind11::dict stats() const;
    void reset_stats();

    // Sequences (context_sequences.cpp). decode() runs a batch of any sequences in n_batch
    // chunks and returns the logits of the flagged tokens, one row each in batch order; logits
    // None flags each sequence's last token.
    pybind11::array_t<float> decode(const std::vector<int32_t>& tokens,
                                    const std::optional<std::vector<int32_t>>& positions,
                                    const std::optional<std::vector<int32_t>>& seq_ids,
                                    const std::optional<std::vector<bool>>& logits);
    int32_t n_seq_max() const;
    void kv_seq_remove(int32_t seq, int32_t p0, int32_t p1);
    void kv_seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1);
    void kv_seq_keep(int32_t seq);
    void kv_seq_shift(int32_t seq, int32_t p0, int32_t p1, int32_t delta);
    int32_t kv_seq_pos_min(int32_t seq) const;
    int32_t kv_seq_pos_max(int32_t seq) const;
    int32_t kv_n_used_cells() const;

    // Saved state (context_saved_state.cpp): one sequence (seq >= 0) or all (-1), with a
    // sampler's state when one is given.
    pybind11::bytes save_state(int32_t seq, const sampler* with) const;
    void load_state(const pybind11::bytes& data, int32_t seq, const sampler* with);
    void save_state_file(const std::string& path, int32_t seq, const sampler* with) const;
    void load_state_file(const std::string& path, int32_t seq, const sampler* with);

  private:
    // Raises InvalidArgumentError for a sequence id outside [0, n_seq_max) (-1 too unless
    // all_allowed).
    void require_sequence(const context_state& s, int32_t seq, bool all_allowed) const;
    // After a state load: the restored last logits become logits(), when there are any.
    void take_restored_logits(context_state& s);

    std::shared_ptr<context_state> state_;
};

void bind_context(pybind11::module_& m);
void bind_context_sequences(pybind11::class_<context>& c);
void bind_context_saved_state(pybind11::class_<context>& c);

} // namespace pi::python
