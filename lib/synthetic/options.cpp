#include "synthetic/options.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "platform/files.hpp"
#include "quant/types.hpp"
#include "synthetic/construction.hpp"
#include "synthetic/family.hpp"

namespace pi::synth {

void validate(const synth_options& o) {
    const family_traits& f = family_named(o.arch);
    const std::pair<const char*, int32_t> positive[] = {
        {"n_embd", o.n_embd},       {"n_layer", o.n_layer}, {"n_head", o.n_head},
        {"n_head_kv", o.n_head_kv}, {"n_ff", o.n_ff},       {"n_ctx_train", o.n_ctx_train}};
    for (const auto& [name, v] : positive)
        if (v <= 0) bad_option(name, " must be > 0 (got ", v, ")");
    if (o.n_embd % o.n_head != 0)
        bad_option("n_head (", o.n_head, ") must divide n_embd (", o.n_embd, ")");
    if (o.n_head % o.n_head_kv != 0)
        bad_option("n_head_kv (", o.n_head_kv, ") must divide n_head (", o.n_head, ")");
    if ((o.n_embd / o.n_head) % 2 != 0)
        bad_option("head dimension n_embd/n_head (", o.n_embd / o.n_head, ") must be even");
    if (o.predictor_rank != 0 && (o.predictor_rank < 4 || o.predictor_rank % 2 != 0))
        bad_option("predictor_rank (", o.predictor_rank, ") must be 0 or an even number >= 4");
    if (o.weight_type != ggml_type::f32 && o.weight_type != ggml_type::f16)
        bad_option("weight_type must be F32 or F16");
    if (!(o.sparsity >= 0.0f && o.sparsity < 1.0f))
        bad_option("sparsity (", o.sparsity, ") must be in [0, 1)");
    if (!(o.power_law >= 0.0f && std::isfinite(o.power_law)))
        bad_option("power_law (", o.power_law, ") must be finite and >= 0");
    if (!(o.predictor_noise >= 0.0f && std::isfinite(o.predictor_noise)))
        bad_option("predictor_noise (", o.predictor_noise, ") must be finite and >= 0");
    if (!(o.rms_eps > 0.0f && std::isfinite(o.rms_eps)))
        bad_option("rms_eps (", o.rms_eps, ") must be finite and > 0");
    if (!(o.rope_freq_base > 0.0f && std::isfinite(o.rope_freq_base)))
        bad_option("rope_freq_base (", o.rope_freq_base, ") must be finite and > 0");
    if (!f.gate && !o.sparse && !o.dense_relu)
        bad_option("dense_relu = 0 asks for SwiGLU, which needs a gate; ", o.arch,
                   "'s FFN has none (relu(up·x))");
    if (f.id == family::opt && o.n_ctx_train < calibration_length)
        bad_option("n_ctx_train (", o.n_ctx_train, ") must be >= ", calibration_length,
                   " for opt: the calibration sequences take that many learned positions");
    if (o.vocab_path.empty()) bad_option("vocab_path is empty");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(platform::utf8_path(o.vocab_path), ec))
        bad_option("vocab_path '", o.vocab_path, "' is not a readable file");
}

geometry make_geometry(const synth_options& o, int64_t n_vocab) {
    geometry g{};
    g.n_embd = o.n_embd;
    g.n_ff = o.n_ff;
    g.n_layer = o.n_layer;
    g.n_head = o.n_head;
    g.n_head_kv = o.n_head_kv;
    g.head_dim = o.n_embd / o.n_head;
    g.n_embd_kv = g.head_dim * o.n_head_kv;
    g.n_vocab = n_vocab;
    g.rank0 =
        o.predictor_rank != 0 ? o.predictor_rank / 2 - 1 : std::max<int64_t>(8, o.n_embd / 16);
    return g;
}

void check_size(const geometry& g, const synth_options& o) {
    const auto d = static_cast<double>(g.n_embd);
    const auto ff = static_cast<double>(g.n_ff);
    const double rank = 2.0 * static_cast<double>(g.rank0 + 1);
    const double per_layer = 2.0 * d + 2.0 * d * d + 2.0 * d * static_cast<double>(g.n_embd_kv) +
                             3.0 * d * ff + rank * (d + ff);
    const double positions = d * (static_cast<double>(o.n_ctx_train) + 2.0); // opt's table
    const double params = 2.0 * d * static_cast<double>(g.n_vocab) + d + positions +
                          static_cast<double>(g.n_layer) * per_layer;
    if (params > 0x1p40)
        bad_option("the model would have ", params, " parameters; at most 2^40 are supported");
}

} // namespace pi::synth
