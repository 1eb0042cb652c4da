#include <cstring>
#include <string>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "engine/placement.hpp"
#include "planner/activation_stats.hpp"
#include "support/log.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

struct chosen_device {
    std::unique_ptr<device> dev;
    std::string name;
};

// Budget in bytes from the params; < 0 means "the device's free memory minus a margin".
int64_t budget_of(const pi_model_params& p) {
    if (p.vram_budget != p.vram_budget)
        fail(status::invalid_argument, "pi_model_params.vram_budget is NaN");
    if (p.vram_budget < 0) return -1;
    if (p.vram_budget > 9.0e18)
        fail(status::invalid_argument, "pi_model_params.vram_budget is absurd");
    return static_cast<int64_t>(p.vram_budget);
}

chosen_device choose(const pi_model_params& p, int64_t budget) {
    const std::string name = p.offload_device ? p.offload_device : "auto";
    if (name == "none") return {};
    if (name == "cpu") {
        if (budget < 0)
            fail(status::invalid_argument,
                 "the \"cpu\" offload device needs an explicit vram_budget in bytes");
        return {std::make_unique<device>(device::cpu(1, static_cast<size_t>(budget))),
                "cpu (second instance)"};
    }
    if (name == "cuda" || name == "hip")
        return {std::make_unique<device>(device::from_module(name, 0)), name};
    if (name != "auto")
        fail(status::invalid_argument, "pi_model_params.offload_device '", name,
             "' is not one of auto, cuda, hip, cpu, none");
    std::string reasons;
    for (const char* module : {"cuda", "hip"}) {
        try {
            return {std::make_unique<device>(device::from_module(module, 0)), module};
        } catch (const error& e) {
            reasons += concat(reasons.empty() ? "" : "; ", e.what());
        }
    }
    log(log_level::info, concat("no GPU backend is active, running on the CPU (", reasons, ")"));
    return {};
}

offload_request request_of(const pi_model_params& p, const char* path, int64_t budget) {
    offload_request r;
    r.model_path = path;
    r.budget = budget;
    r.reset_gpu_index = p.reset_gpu_index != 0;
    r.disable_gpu_index = p.disable_gpu_index != 0;
    if (p.activation_stats) r.stats_path = p.activation_stats;
    r.kv_n_ctx = p.kv_n_ctx;
    return r;
}

} // namespace

void pi::api::attach_offload(pi_model& handle, const pi_model_params& p, const char* path) {
    const model& m = *handle.impl;
    if (p.kv_n_ctx < 0)
        fail(status::invalid_argument, "pi_model_params.kv_n_ctx ", p.kv_n_ctx, " is negative");
    if (!m.sparse_inference()) return;
    const int64_t budget = budget_of(p);
    if (budget == 0) return;
    chosen_device chosen = choose(p, budget);
    if (!chosen.dev) return;
    offload_result placed = place_on_device(m, std::move(chosen.dev), request_of(p, path, budget));
    if (!placed.placed) return;
    handle.offloaded = std::move(placed.placed);
    handle.offload_device = chosen.name;
}

extern "C" {

pi_status pi_model_estimate_memory(const char* path, const pi_model_params* params, char* report,
                                   size_t capacity, size_t* len) {
    return guard([&] {
        require(path, "path");
        require(len, "len");
        *len = 0;
        if (!report && capacity > 0) fail(status::invalid_argument, "argument 'report' is NULL");
        const pi_model_params p =
            api::read_params(params, pi_model_default_params(), "pi_model_params");
        const int64_t budget = budget_of(p);
        if (budget < 0)
            fail(status::invalid_argument,
                 "pi_model_estimate_memory needs vram_budget >= 0 (bytes)");
        load_options o;
        o.force_dense = p.dense != 0;
        const auto m = model::load(path, o);
        std::string text;
        if (!m->sparse_inference()) {
            text = "dense inference: every FFN neuron runs on the CPU, nothing is offloaded\n";
        } else {
            offload_request r = request_of(p, path, budget);
            // The weight types of the device that loading would pick; without one, every type.
            // An estimate also plans for a named GPU this machine lacks: the question may be what
            // a budget would place on another machine.
            uint64_t weight_types = ~uint64_t{0};
            chosen_device chosen;
            std::string missing;
            try {
                chosen = choose(p, budget);
            } catch (const error& e) {
                if (e.code() != status::unsupported) throw;
                missing = concat(e.what(), "; ");
            }
            if (chosen.dev) {
                pib_device_info info{};
                device::check("reading the device's properties",
                              chosen.dev->vt().device_info(chosen.dev->ctx(), &info));
                weight_types = info.weight_types;
            } else {
                text =
                    concat(missing, "no offload device is usable: the placement assumes one that "
                                    "computes every weight type\n");
            }
            planner::plan_input in = plan_input_for(*m, static_cast<uint64_t>(budget), r.n_batch,
                                                    r.kv_n_ctx, weight_types);
            if (!r.disable_gpu_index) {
                in.frequencies = r.stats_path.empty()
                                     ? calibrate_activations(*m, 1)
                                     : planner::load_activation_stats(r.stats_path).counts;
            }
            text += planner::describe(planner::make_plan(in));
        }
        api::write_c_string(text, report, capacity, len, "report");
        return PI_OK;
    });
}

} // extern "C"
