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
#include "state.hpp"

namespace pi::python {

class context {
  public:
    context(const model& m, int32_t n_ctx, int32_t n_batch, std::optional<int32_t> n_threads,
            uint32_t seed, bool kv_f16);

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

  private:
    std::shared_ptr<context_state> state_;
};

void bind_context(pybind11::module_& m);

} // namespace pi::python
