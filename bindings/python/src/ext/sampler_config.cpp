#include "sampler_config.hpp"

#include <string_view>
#include <utility>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

using chain_params = pi_sampler_params;

// The numeric fields, by their C names.
constexpr std::pair<std::string_view, float chain_params::*> float_fields[] = {
    {"temperature", &chain_params::temperature},
    {"top_p", &chain_params::top_p},
    {"min_p", &chain_params::min_p},
    {"typical_p", &chain_params::typical_p},
    {"dynatemp_range", &chain_params::dynatemp_range},
    {"dynatemp_exponent", &chain_params::dynatemp_exponent},
    {"repeat_penalty", &chain_params::repeat_penalty},
    {"frequency_penalty", &chain_params::frequency_penalty},
    {"presence_penalty", &chain_params::presence_penalty},
    {"dry_multiplier", &chain_params::dry_multiplier},
    {"dry_base", &chain_params::dry_base},
    {"xtc_probability", &chain_params::xtc_probability},
    {"xtc_threshold", &chain_params::xtc_threshold},
    {"mirostat_tau", &chain_params::mirostat_tau},
    {"mirostat_eta", &chain_params::mirostat_eta},
};
constexpr std::pair<std::string_view, int32_t chain_params::*> int_fields[] = {
    {"top_k", &chain_params::top_k},
    {"penalty_last_n", &chain_params::penalty_last_n},
    {"dry_allowed_length", &chain_params::dry_allowed_length},
    {"dry_penalty_last_n", &chain_params::dry_penalty_last_n},
    {"mirostat", &chain_params::mirostat},
    {"min_keep", &chain_params::min_keep},
};

template <typename T, size_t N>
bool set_field(const std::pair<std::string_view, T chain_params::*> (&table)[N],
               std::string_view name, py::handle value, chain_params& p) {
    for (const auto& [field, member] : table) {
        if (field != name) continue;
        p.*member = value.cast<T>();
        return true;
    }
    return false;
}

std::optional<std::string> checked_text(py::handle value, const char* what) {
    if (value.is_none()) return std::nullopt;
    auto text = value.cast<std::string>();
    require_no_nul(text, what);
    return text;
}

} // namespace

std::shared_ptr<const sampler_config> sampler_config::from_dict(const py::dict& fields) {
    std::shared_ptr<sampler_config> c(new sampler_config());
    chain_params& p = c->params_;
    p = pi_sampler_default_params();
    for (const auto& [key, value] : fields) {
        const auto name = key.cast<std::string>();
        if (set_field(float_fields, name, value, p) || set_field(int_fields, name, value, p))
            continue;
        if (name == "seed") {
            p.seed = value.cast<uint32_t>();
        } else if (name == "dry_sequence_breakers") {
            c->breakers_ = value.cast<std::vector<std::string>>();
            c->breakers_given_ = true;
            for (const std::string& b : c->breakers_)
                require_no_nul(b, "a DRY sequence breaker");
        } else if (name == "logit_bias") {
            for (const auto& [token, bias] : value.cast<std::vector<std::pair<int32_t, float>>>())
                c->logit_bias_.push_back(pi_logit_bias{token, bias});
        } else if (name == "stages") {
            c->stages_ = value.cast<std::vector<int32_t>>();
            c->stages_given_ = true;
        } else if (name == "grammar") {
            c->grammar_ = checked_text(value, "the grammar");
        } else if (name == "grammar_root") {
            c->grammar_root_ = checked_text(value, "the grammar root");
        } else if (name == "json_schema") {
            c->json_schema_ = checked_text(value, "the JSON schema");
        } else {
            throw status_error(PI_ERR_INVALID_ARGUMENT, "unknown sampler setting '" + name + "'");
        }
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
