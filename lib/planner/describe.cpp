// The human-readable plan report (pi_model_estimate_memory and verbose loading print it).
#include <algorithm>
#include <sstream>
#include <string>

#include "planner/planner.hpp"
#include "support/error.hpp"

namespace pi::planner {

namespace {

double mib(uint64_t bytes) {
    return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

} // namespace

std::string describe(const plan& p) {
    const size_t n_layer = p.n_ff.size();
    const auto count = [](const std::vector<bool>& v) {
        return std::count(v.begin(), v.end(), true);
    };
    const auto line = [](std::ostringstream& out, const char* name, uint64_t bytes) {
        out << "  " << name;
        for (size_t i = std::char_traits<char>::length(name); i < 12; ++i)
            out << ' ';
        out << std::fixed;
        out.precision(2);
        out << mib(bytes) << " MiB";
    };
    uint64_t hot_total = 0, ff_total = 0;
    for (size_t l = 0; l < n_layer; ++l) {
        hot_total += p.hot[l].size();
        ff_total += static_cast<uint64_t>(p.n_ff[l]);
    }

    std::ostringstream out;
    throw_on_stream_failure(out);
    out << std::fixed;
    out.precision(2);
    out << "device plan: " << mib(p.bytes_total) << " MiB of a " << mib(p.budget)
        << " MiB budget\n";
    line(out, "scratch", p.bytes_scratch);
    out << '\n';
    line(out, "attention", p.bytes_attn);
    out << " (" << count(p.attn_on_device) << "/" << n_layer << " layers)\n";
    line(out, "predictors", p.bytes_predictor);
    out << " (" << count(p.predictor_on_device) << "/" << n_layer << " layers)\n";
    line(out, "ffn norms", p.bytes_ffn_norm);
    out << " (" << count(p.ffn_norm_on_device) << "/" << n_layer << " layers)\n";
    line(out, "output", p.bytes_output);
    out << (p.output_on_device ? " (on device)\n" : " (on CPU)\n");
    line(out, "kv cache", p.bytes_kv);
    out << (p.kv_on_device ? " (on device)\n" : " (on CPU)\n");
    line(out, "ffn hot", p.bytes_ffn);
    out << " (" << hot_total << " of " << ff_total << " neurons";
    if (ff_total > 0) out << ", " << 100.0 * static_cast<double>(hot_total) / ff_total << "%";
    out << ")\n";
    out << "hot neurons per layer:";
    for (size_t l = 0; l < n_layer; ++l) {
        if (l % 8 == 0) out << "\n ";
        out << ' ' << l << ':' << p.hot[l].size() << '/' << p.n_ff[l];
    }
    out << '\n';
    return out.str();
}

} // namespace pi::planner
