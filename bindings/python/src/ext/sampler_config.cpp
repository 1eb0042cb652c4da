#include "sampler_config.hpp"

#include <string_view>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

std::optional<std::string> checked_text(py::handle value, const char* what) {
    if (value.is_none()) return std::nullopt;
    auto text = value.cast<std::string>();
    require_no_nul(text, what);
    return text;
}

} // namespace

std::shared_ptr<const sampler_config> sampler_config::from_dict(const py::dict& fields) {
    std::shared_ptr<sampler_config> c(new sampler_config());
    pi_sampler_params& p = c->params_;
    p = pi_sampler_default_params();
    for (const auto& [key, value] : fields) {
        const auto name = key.cast<std::string>();
        const std::string_view k = name;
        if (k == "temperature") p.temperature = value.cast<float>();
        else if (k == "top_k") p.top_k = value.cast<int32_t>();
        else if (k == "top_p") p.top_p = value.cast<float>();
        else if (k == "seed") p.seed = value.cast<uint32_t>();
        else if (k == "min_p") p.min_p = value.cast<float>();
        else if (k == "typical_p") p.typical_p = value.cast<float>();
        else if (k == "dynatemp_range") p.dynatemp_range = value.cast<float>();
        else if (k == "dynatemp_exponent") p.dynatemp_exponent = value.cast<float>();
        else if (k == "penalty_last_n") p.penalty_last_n = value.cast<int32_t>();
        else if (k == "repeat_penalty") p.repeat_penalty = value.cast<float>();
        else if (k == "frequency_penalty") p.frequency_penalty = value.cast<float>();
        else if (k == "presence_penalty") p.presence_penalty = value.cast<float>();
        else if (k == "dry_multiplier") p.dry_multiplier = value.cast<float>();
        else if (k == "dry_base") p.dry_base = value.cast<float>();
        else if (k == "dry_allowed_length") p.dry_allowed_length = value.cast<int32_t>();
        else if (k == "dry_penalty_last_n") p.dry_penalty_last_n = value.cast<int32_t>();
        else if (k == "dry_sequence_breakers") {
            c->breakers_ = value.cast<std::vector<std::string>>();
            c->breakers_given_ = true;
            for (const std::string& b : c->breakers_)
                require_no_nul(b, "a DRY sequence breaker");
        } else if (k == "xtc_probability") p.xtc_probability = value.cast<float>();
        else if (k == "xtc_threshold") p.xtc_threshold = value.cast<float>();
        else if (k == "mirostat") p.mirostat = value.cast<int32_t>();
        else if (k == "mirostat_tau") p.mirostat_tau = value.cast<float>();
        else if (k == "mirostat_eta") p.mirostat_eta = value.cast<float>();
        else if (k == "min_keep") p.min_keep = value.cast<int32_t>();
        else if (k == "logit_bias") {
            for (const auto& [token, bias] : value.cast<std::vector<std::pair<int32_t, float>>>())
                c->logit_bias_.push_back(pi_logit_bias{token, bias});
        } else if (k == "stages") {
            c->stages_ = value.cast<std::vector<int32_t>>();
            c->stages_given_ = true;
        }
        else if (k == "grammar") c->grammar_ = checked_text(value, "the grammar");
        else if (k == "grammar_root") c->grammar_root_ = checked_text(value, "the grammar root");
        else if (k == "json_schema") c->json_schema_ = checked_text(value, "the JSON schema");
        else
            throw status_error(PI_ERR_INVALID_ARGUMENT, "unknown sampler setting '" + name + "'");
    }
    c->point_into_storage();
    return c;
}

void sampler_config::point_into_storage() {
    pi_sampler_params& p = params_;
    breaker_pointers_.clear();
    for (const std::string& b : breakers_)
        breaker_pointers_.push_back(b.c_str());
    // NULL asks for the library's defaults; a given empty list (a non-NULL pointer, hence the
    // reserve) means none.
    breaker_pointers_.reserve(1);
    stages_.reserve(1);
    p.dry_sequence_breakers = breakers_given_ ? breaker_pointers_.data() : nullptr;
    p.n_dry_sequence_breakers = breakers_.size();
    p.logit_bias = logit_bias_.empty() ? nullptr : logit_bias_.data();
    p.n_logit_bias = logit_bias_.size();
    p.stages = stages_given_ ? stages_.data() : nullptr;
    p.n_stages = stages_.size();
    p.grammar = grammar_ ? grammar_->c_str() : nullptr;
    p.grammar_root = grammar_root_ ? grammar_root_->c_str() : nullptr;
    p.json_schema = json_schema_ ? json_schema_->c_str() : nullptr;
}

} // namespace pi::python
