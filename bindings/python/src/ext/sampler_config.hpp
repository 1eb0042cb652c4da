#pragma once
// The sampler chain's settings as the powerinfer package passes them (a dict of
// pi_sampler_params field names): the params plus the storage their pointers point into, so that
// a config stays valid for a worker thread as long as someone holds it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "powerinfer.h"

namespace pi::python {

class sampler_config {
  public:
    // Unknown keys are InvalidArgumentError: the package validates names before they get here.
    static std::shared_ptr<const sampler_config> from_dict(const pybind11::dict& fields);

    sampler_config(const sampler_config&) = delete;
    sampler_config& operator=(const sampler_config&) = delete;

    // Points into this object: valid while it lives.
    const pi_sampler_params& params() const noexcept { return params_; }

  private:
    sampler_config() = default;
    void point_into_storage();

    pi_sampler_params params_{};
    std::vector<std::string> breakers_;
    std::vector<const char*> breaker_pointers_;
    std::vector<pi_logit_bias> logit_bias_;
    std::vector<int32_t> stages_;
    bool breakers_given_ = false;
    bool stages_given_ = false;
    std::optional<std::string> grammar_, grammar_root_, json_schema_;
};

} // namespace pi::python
