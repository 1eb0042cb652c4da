#pragma once
// powerinfer._powerinfer._Sampler: a pi_sampler chain. The handle is shared with a generation
// that uses it, and marked busy meanwhile: a pi_sampler belongs to one thread at a time.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "model.hpp"
#include "sampler_config.hpp"
#include "state.hpp"

namespace pi::python {

struct sampler_handle {
    sampler_handle(pi_sampler* s, model_ptr m) : sampler(s), model(std::move(m)) {}
    ~sampler_handle() { pi_sampler_free(sampler); }
    sampler_handle(const sampler_handle&) = delete;
    sampler_handle& operator=(const sampler_handle&) = delete;

    pi_sampler* sampler;
    model_ptr model; // may be null; else kept alive for the chain's vocabulary
    std::atomic<bool> busy{false};
};

// Marks a sampler in use; a second concurrent user is refused.
class sampler_claim {
  public:
    explicit sampler_claim(std::shared_ptr<sampler_handle> h);
    ~sampler_claim();
    sampler_claim(const sampler_claim&) = delete;
    sampler_claim& operator=(const sampler_claim&) = delete;

  private:
    std::shared_ptr<sampler_handle> handle_;
};

class sampler {
  public:
    // m: the model whose vocabulary the chain needs (grammar, logit bias, DRY), or null.
    sampler(const model* m, const pybind11::dict& fields);

    // The live handle; ValueError once closed.
    std::shared_ptr<sampler_handle> handle() const;
    void close() noexcept { handle_.reset(); }
    bool closed() const noexcept { return !handle_; }

    int32_t sample(const pybind11::array_t<float, pybind11::array::c_style |
                                                      pybind11::array::forcecast>& logits);
    void accept(int32_t token);
    void reset();
    pybind11::bytes save_state() const;
    void load_state(const pybind11::bytes& data);

  private:
    std::shared_ptr<sampler_handle> handle_;
};

void bind_sampler(pybind11::module_& m);

} // namespace pi::python
