// Synthetic PowerInfer models. Weights are random, but built so that the FFN reaches a chosen
// activation sparsity with power-law skewed neurons and the predictor is exact; the construction
// and its reasons are in docs/synthetic-models.md. A short forward pass over calibration tokens
// sets the gate biases and the output scales, so the statistics hold at every depth.
#include "model/synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numbers>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.hpp"
#include "support/error.hpp"

namespace pi {
namespace {

// ---------------------------------------------------------------- deterministic randomness

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// xoshiro256** with Box-Muller normals: the same bits on every platform, unlike
// std::normal_distribution whose algorithm the standard leaves to the library.
class rng {
  public:
    explicit rng(uint64_t seed) {
        for (auto& word : s_)
            word = splitmix64(seed);
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)

    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
        const double angle = 2.0 * std::numbers::pi * uniform();
        spare_ = radius * std::sin(angle);
        has_spare_ = true;
        return radius * std::cos(angle);
    }

    float sign() { return (next() >> 63) != 0 ? 1.0f : -1.0f; }

    uint64_t below(uint64_t n) {
        const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
        uint64_t x = next();
        while (x >= limit)
            x = next();
        return x % n;
    }

  private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::array<uint64_t, 4> s_{};
    double spare_ = 0.0;
    bool has_spare_ = false;
};

// Every tensor draws from its own stream, so that changing one knob (say predictor_noise or
// sparse/dense) leaves every other tensor's random numbers unchanged.
enum class stream : uint64_t {
    token_embd = 1,
    calibration_tokens,
    attn_norm,
    attn_q,
    attn_k,
    attn_v,
    attn_output,
    ffn_norm,
    predictor_a,
    predictor_b,
    firing_rates,
    ffn_up,
    ffn_down,
    predictor_noise,
    output_norm,
    output,
};

rng stream_rng(uint64_t seed, int64_t layer, stream which) {
    uint64_t key = (static_cast<uint64_t>(layer + 1) << 16) | static_cast<uint64_t>(which);
    return rng(seed ^ splitmix64(key));
}

// ---------------------------------------------------------------- construction constants

// Calibration runs several independent sequences: tokens of one sequence share their context,
// so statistics from a single sequence underestimate the spread between sequences.
constexpr int64_t calibration_sequences = 4;
constexpr int64_t calibration_length = 32;
constexpr double attn_output_rms = 0.6; // per-channel RMS each attention block adds to h
constexpr double ffn_output_rms = 0.6;  // the same for each FFN block
constexpr double logit_std = 3.0;       // target spread of the logits over the vocabulary
constexpr double qk_variance = 2.0;     // variance of q and k entries: scores spread ~2
constexpr double norm_weight_std = 0.1; // RMSNorm weights are 1 + N(0, 0.1^2)
constexpr double max_firing_rate = 0.95;
constexpr double max_abs_z = 8.0; // bound on the bias in standard deviations

float round_f16(double x) {
    return fp16_to_fp32(fp32_to_fp16(static_cast<float>(x)));
}

double pow2_near(double x) {
    return std::exp2(std::round(std::log2(x)));
}

// Inverse of the standard normal CDF (Acklam's rational approximation, relative error 1.2e-9).
double normal_quantile(double p) {
    static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                   -2.759285104469687e+02, 1.383577518672690e+02,
                                   -3.066479806614716e+01, 2.506628277459239e+00};
    static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                   -1.556989798598866e+02, 6.680131188771972e+01,
                                   -1.328068155288572e+01};
    static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                   -2.400758277161838e+00, -2.549732539343734e+00,
                                   4.374664141464968e+00,  2.938163982698783e+00};
    static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                   2.445134137142996e+00, 3.754408661907416e+00};
    constexpr double low = 0.02425;
    if (p <= 0.0) return -max_abs_z;
    if (p >= 1.0) return max_abs_z;
    auto tail = [&](double q) {
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    };
    if (p < low) return tail(std::sqrt(-2.0 * std::log(p)));
    if (p > 1.0 - low) return -tail(std::sqrt(-2.0 * std::log(1.0 - p)));
    const double q = p - 0.5;
    const double r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

// Firing rate of each neuron: min(cap, c·(k+1)^-power_law) for rank k, with c chosen by
// bisection so that the mean is `mean_rate`; ranks are then shuffled over the neurons.
std::vector<double> firing_rates(int64_t n_ff, double mean_rate, double power_law, rng r) {
    const double cap = std::max(max_firing_rate, mean_rate);
    std::vector<double> shape(static_cast<size_t>(n_ff));
    for (int64_t k = 0; k < n_ff; ++k)
        shape[static_cast<size_t>(k)] = std::pow(static_cast<double>(k + 1), -power_law);
    auto mean_for = [&](double scale) {
        double sum = 0.0;
        for (double s : shape)
            sum += std::min(cap, scale * s);
        return sum / static_cast<double>(n_ff);
    };
    double lo = 0.0;
    double hi = cap / shape.back();
    for (int iter = 0; iter < 200; ++iter) {
        const double mid = 0.5 * (lo + hi);
        (mean_for(mid) < mean_rate ? lo : hi) = mid;
    }
    std::vector<double> rates(shape.size());
    for (size_t k = 0; k < shape.size(); ++k)
        rates[k] = std::min(cap, hi * shape[k]);
    for (size_t k = rates.size(); k > 1; --k)
        std::swap(rates[k - 1], rates[r.below(k)]);
    return rates;
}

// ---------------------------------------------------------------- dense float matrices

// Row-major; a row is one ggml row (ne0 = cols), so W·x is one dot product per row.
struct matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<float> data;

    matrix() = default;
    matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}

    float* row(int64_t i) { return data.data() + i * cols; }
    const float* row(int64_t i) const { return data.data() + i * cols; }
    float& at(int64_t i, int64_t j) { return data[static_cast<size_t>(i * cols + j)]; }
    float at(int64_t i, int64_t j) const { return data[static_cast<size_t>(i * cols + j)]; }

    void scale(float s) {
        for (float& v : data)
            v *= s;
    }
    void zero_column(int64_t j) {
        for (int64_t i = 0; i < rows; ++i)
            at(i, j) = 0.0f;
    }
};

matrix gaussian(int64_t rows, int64_t cols, double stddev, rng r) {
    matrix m(rows, cols);
    for (float& v : m.data)
        v = static_cast<float>(stddev * r.normal());
    return m;
}

matrix rademacher(int64_t rows, int64_t cols, rng r) {
    matrix m(rows, cols);
    for (float& v : m.data)
        v = r.sign();
    return m;
}

matrix transpose(const matrix& m) {
    matrix t(m.cols, m.rows);
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = 0; j < m.cols; ++j)
            t.at(j, i) = m.at(i, j);
    return t;
}

float dot(const float* a, const float* b, int64_t n) {
    // Eight partial sums let the compiler vectorise without reassociating a single sum.
    std::array<float, 8> acc{};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int64_t k = 0; k < 8; ++k)
            acc[static_cast<size_t>(k)] += a[i + k] * b[i + k];
    float sum = 0.0f;
    for (float v : acc)
        sum += v;
    for (; i < n; ++i)
        sum += a[i] * b[i];
    return sum;
}

// y[t] = w · x[t] for every row t of x.
matrix project(const matrix& x, const matrix& w) {
    matrix y(x.rows, w.rows);
    for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t t = 0; t < x.rows; ++t)
            y.at(t, r) = dot(w.row(r), x.row(t), w.cols);
    return y;
}

// RMS over every entry except column 0, the constant channel.
double rms_without_channel0(const matrix& m) {
    double sum = 0.0;
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = 1; j < m.cols; ++j)
            sum += static_cast<double>(m.at(i, j)) * m.at(i, j);
    const auto n = static_cast<double>(m.rows * (m.cols - 1));
    return n > 0.0 ? std::sqrt(sum / n) : 0.0;
}

// ---------------------------------------------------------------- geometry and validation

struct geometry {
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_embd_kv, n_vocab, rank0;
    bool bamboo;
};

template <typename... Parts> [[noreturn]] void bad_option(Parts&&... parts) {
    fail(status::invalid_argument, "synthetic model: ", std::forward<Parts>(parts)...);
}

void validate(const synth_options& o) {
    if (o.arch != "llama" && o.arch != "bamboo")
        bad_option("arch '", o.arch, "' is not \"llama\" or \"bamboo\"");
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
    if (o.vocab_path.empty()) bad_option("vocab_path is empty");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.vocab_path, ec))
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
    g.bamboo = o.arch == "bamboo";
    return g;
}

// Rejects sizes whose element counts could overflow the arithmetic below; memory for anything
// smaller is the caller's concern (allocation failure surfaces as std::bad_alloc).
void check_size(const geometry& g) {
    const auto d = static_cast<double>(g.n_embd);
    const auto ff = static_cast<double>(g.n_ff);
    const double rank = 2.0 * static_cast<double>(g.rank0 + 1);
    const double per_layer = 2.0 * d + 2.0 * d * d + 2.0 * d * static_cast<double>(g.n_embd_kv) +
                             3.0 * d * ff + rank * (d + ff);
    const double params =
        2.0 * d * static_cast<double>(g.n_vocab) + d + static_cast<double>(g.n_layer) * per_layer;
    if (params > 0x1p40)
        bad_option("the model would have ", params, " parameters; at most 2^40 are supported");
}

// ---------------------------------------------------------------- calibration forward pass

struct normed {
    matrix x;               // RMSNorm(h)·w per token
    std::vector<float> rms; // sqrt(mean(h²) + eps) per token
};

normed rms_norm(const matrix& h, std::span<const float> w, float eps) {
    normed out{matrix(h.rows, h.cols), std::vector<float>(static_cast<size_t>(h.rows))};
    for (int64_t t = 0; t < h.rows; ++t) {
        double sum = 0.0;
        for (int64_t j = 0; j < h.cols; ++j)
            sum += static_cast<double>(h.at(t, j)) * h.at(t, j);
        const double rms = std::sqrt(sum / static_cast<double>(h.cols) + eps);
        out.rms[static_cast<size_t>(t)] = static_cast<float>(rms);
        for (int64_t j = 0; j < h.cols; ++j)
            out.x.at(t, j) = static_cast<float>(h.at(t, j) / rms * w[static_cast<size_t>(j)]);
    }
    return out;
}

// Position of calibration row t: rows are calibration_sequences runs of calibration_length.
int64_t position(int64_t t) {
    return t % calibration_length;
}

// RoPE mode 0: adjacent pairs (2i, 2i+1) of each head rotate by pos·base^(-2i/head_dim).
void rope(matrix& x, int64_t head_dim, double base) {
    for (int64_t t = 0; t < x.rows; ++t) {
        for (int64_t h0 = 0; h0 < x.cols; h0 += head_dim) {
            for (int64_t i = 0; i < head_dim / 2; ++i) {
                const double theta =
                    static_cast<double>(position(t)) *
                    std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
                const double cs = std::cos(theta);
                const double sn = std::sin(theta);
                float& a = x.at(t, h0 + 2 * i);
                float& b = x.at(t, h0 + 2 * i + 1);
                const double x0 = a;
                const double x1 = b;
                a = static_cast<float>(x0 * cs - x1 * sn);
                b = static_cast<float>(x0 * sn + x1 * cs);
            }
        }
    }
}

// Causal multi-head attention with grouped KV heads inside each calibration sequence; returns
// the concatenated head outputs.
matrix attention(const matrix& q, const matrix& k, const matrix& v, const geometry& g) {
    matrix out(q.rows, g.n_embd);
    const int64_t group = g.n_head / g.n_head_kv;
    const double scale = 1.0 / std::sqrt(static_cast<double>(g.head_dim));
    std::vector<double> weights(static_cast<size_t>(calibration_length));
    for (int64_t t = 0; t < q.rows; ++t) {
        const int64_t first = t - position(t);
        for (int64_t head = 0; head < g.n_head; ++head) {
            const int64_t qo = head * g.head_dim;
            const int64_t ko = (head / group) * g.head_dim;
            double top = -INFINITY;
            for (int64_t s = first; s <= t; ++s) {
                const double score = scale * dot(q.row(t) + qo, k.row(s) + ko, g.head_dim);
                weights[static_cast<size_t>(s - first)] = score;
                top = std::max(top, score);
            }
            double total = 0.0;
            for (int64_t s = first; s <= t; ++s) {
                double& w = weights[static_cast<size_t>(s - first)];
                w = std::exp(w - top);
                total += w;
            }
            for (int64_t s = first; s <= t; ++s) {
                const double w = weights[static_cast<size_t>(s - first)] / total;
                for (int64_t j = 0; j < g.head_dim; ++j)
                    out.at(t, qo + j) += static_cast<float>(w * v.at(s, ko + j));
            }
        }
    }
    return out;
}

// ---------------------------------------------------------------- one layer

struct layer_weights {
    std::vector<float> attn_norm, ffn_norm;
    matrix attn_q, attn_k, attn_v, attn_output;
    matrix ffn_gate, ffn_up, ffn_down_t;
    matrix fc1, fc2;
};

std::vector<float> norm_weights(int64_t n, rng r) {
    std::vector<float> w(static_cast<size_t>(n));
    for (float& v : w)
        v = round_f16(1.0 + norm_weight_std * r.normal());
    return w;
}

struct builder {
    const synth_options& opt;
    const geometry& g;
    float constant; // the value C of residual channel 0

    // Attention block: random projections; channel 0 is neither read nor written, and the
    // output projection is scaled so that the block adds attn_output_rms per channel.
    void attention_block(layer_weights& lw, matrix& h, int64_t layer) const {
        const uint64_t seed = opt.seed;
        lw.attn_norm = norm_weights(g.n_embd, stream_rng(seed, layer, stream::attn_norm));
        const double qk_std = std::sqrt(qk_variance / static_cast<double>(g.n_embd));
        const double v_std = 1.0 / std::sqrt(static_cast<double>(g.n_embd));
        lw.attn_q = gaussian(g.n_embd, g.n_embd, qk_std, stream_rng(seed, layer, stream::attn_q));
        lw.attn_k =
            gaussian(g.n_embd_kv, g.n_embd, qk_std, stream_rng(seed, layer, stream::attn_k));
        lw.attn_v = gaussian(g.n_embd_kv, g.n_embd, v_std, stream_rng(seed, layer, stream::attn_v));
        lw.attn_output =
            gaussian(g.n_embd, g.n_embd, v_std, stream_rng(seed, layer, stream::attn_output));
        for (matrix* m : {&lw.attn_q, &lw.attn_k, &lw.attn_v})
            m->zero_column(0);
        std::fill_n(lw.attn_output.row(0), g.n_embd, 0.0f);

        const normed an = rms_norm(h, lw.attn_norm, opt.rms_eps);
        matrix q = project(an.x, lw.attn_q);
        matrix k = project(an.x, lw.attn_k);
        const matrix v = project(an.x, lw.attn_v);
        rope(q, g.head_dim, opt.rope_freq_base);
        rope(k, g.head_dim, opt.rope_freq_base);
        matrix out = project(attention(q, k, v, g), lw.attn_output);
        add_scaled(h, out, lw.attn_output, attn_output_rms);
    }

    // FFN block: gate = B·A + b·e0 from random-sign factors, an exact predictor for it, and
    // biases b set from the calibration statistics so that neuron i fires on a fraction
    // rates[i] of tokens.
    void ffn_block(layer_weights& lw, matrix& h, int64_t layer) const {
        const uint64_t seed = opt.seed;
        lw.ffn_norm = norm_weights(g.n_embd, stream_rng(seed, layer, stream::ffn_norm));
        lw.ffn_norm[0] = 1.0f;
        const double w0c = static_cast<double>(lw.ffn_norm[0]) * constant;

        const low_rank f = low_rank_factors(layer);
        // s[t][i] = gate_i·diag(w)·h_t without the bias term, through the low-rank factors.
        matrix scaled_h = h;
        for (int64_t t = 0; t < h.rows; ++t)
            for (int64_t j = 0; j < g.n_embd; ++j)
                scaled_h.at(t, j) *= lw.ffn_norm[static_cast<size_t>(j)];
        matrix s = project(project(scaled_h, f.a), f.b);
        s.scale(f.scale);

        const std::vector<double> rates =
            firing_rates(g.n_ff, 1.0 - static_cast<double>(opt.sparsity), opt.power_law,
                         stream_rng(seed, layer, stream::firing_rates));
        const std::vector<float> bias = gate_biases(s, rates, w0c);

        // B·A holds small integers, so the gate is exactly representable in F16 and equals the
        // predictor's product of F16 factors without rounding.
        lw.ffn_gate = project(f.b, transpose(f.a));
        lw.ffn_gate.scale(f.scale);
        for (int64_t i = 0; i < g.n_ff; ++i)
            lw.ffn_gate.at(i, 0) = bias[static_cast<size_t>(i)];
        predictor(lw, f, bias, layer);

        const double up_std = 1.0 / std::sqrt(static_cast<double>(g.n_embd));
        lw.ffn_up = gaussian(g.n_ff, g.n_embd, up_std, stream_rng(seed, layer, stream::ffn_up));
        lw.ffn_up.zero_column(0);
        lw.ffn_down_t = gaussian(g.n_ff, g.n_embd, 1.0, stream_rng(seed, layer, stream::ffn_down));
        lw.ffn_down_t.zero_column(0);

        const normed xn = rms_norm(h, lw.ffn_norm, opt.rms_eps);
        matrix out(h.rows, g.n_embd);
        for (int64_t t = 0; t < h.rows; ++t) {
            const double inv_rms = 1.0 / xn.rms[static_cast<size_t>(t)];
            for (int64_t i = 0; i < g.n_ff; ++i) {
                const double gate = (s.at(t, i) + bias[static_cast<size_t>(i)] * w0c) * inv_rms;
                if (gate <= 0.0) continue; // the neuron is inactive: it adds nothing
                const double up = dot(lw.ffn_up.row(i), xn.x.row(t), g.n_embd);
                const double act = gate * (g.bamboo ? std::max(0.0, up) : up);
                const float* down = lw.ffn_down_t.row(i);
                float* y = out.row(t);
                for (int64_t j = 0; j < g.n_embd; ++j)
                    y[j] += static_cast<float>(act * down[j]);
            }
        }
        add_scaled(h, out, lw.ffn_down_t, ffn_output_rms);
    }

    // Gate factors: A [r0, n_embd] and B [n_ff, r0] of random signs, column 0 of A zero (the
    // constant channel enters the gate only through the bias). scale = s_a·s_b with powers of
    // two near 1/sqrt(n_embd) and 1/sqrt(r0), so products stay exact in F16.
    struct low_rank {
        matrix a, b;
        float scale_a, scale_b, scale;
    };

    low_rank low_rank_factors(int64_t layer) const {
        low_rank f;
        f.a = rademacher(g.rank0, g.n_embd, stream_rng(opt.seed, layer, stream::predictor_a));
        f.a.zero_column(0);
        f.b = rademacher(g.n_ff, g.rank0, stream_rng(opt.seed, layer, stream::predictor_b));
        f.scale_a = static_cast<float>(pow2_near(1.0 / std::sqrt(static_cast<double>(g.n_embd))));
        f.scale_b = static_cast<float>(pow2_near(1.0 / std::sqrt(static_cast<double>(g.rank0))));
        f.scale = f.scale_a * f.scale_b;
        return f;
    }

    // b_i = -(mean_i + std_i·z_i)/(w0·C) with z_i = Φ⁻¹(1 - rate_i): under a normal fit of the
    // calibration values s[·][i], the neuron then fires on a fraction rate_i of tokens.
    static std::vector<float> gate_biases(const matrix& s, const std::vector<double>& rates,
                                          double w0c) {
        std::vector<float> bias(rates.size());
        const auto n = static_cast<double>(s.rows);
        for (int64_t i = 0; i < s.cols; ++i) {
            double sum = 0.0;
            double sum2 = 0.0;
            for (int64_t t = 0; t < s.rows; ++t) {
                sum += s.at(t, i);
                sum2 += static_cast<double>(s.at(t, i)) * s.at(t, i);
            }
            const double mean = sum / n;
            const double stddev = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
            const double z = normal_quantile(1.0 - rates[static_cast<size_t>(i)]);
            bias[static_cast<size_t>(i)] =
                round_f16(-(mean + stddev * std::clamp(z, -max_abs_z, max_abs_z)) / w0c);
        }
        return bias;
    }

    // fc1 = [A'; -A'] with A' = [s_a·A·diag(w); w0·e0], fc2 = [B', -B'] with B' = [s_b·B, b]:
    // fc2·relu(fc1·h) = B'·A'·h = gate·diag(w)·h = rms(h)·(gate·xn), whose sign is the gate's.
    void predictor(layer_weights& lw, const low_rank& f, const std::vector<float>& bias,
                   int64_t layer) const {
        const int64_t r0 = g.rank0;
        const int64_t half = r0 + 1;
        lw.fc1 = matrix(2 * half, g.n_embd);
        for (int64_t k = 0; k < r0; ++k)
            for (int64_t j = 1; j < g.n_embd; ++j) {
                const float v = f.scale_a * f.a.at(k, j) * lw.ffn_norm[static_cast<size_t>(j)];
                lw.fc1.at(k, j) = v;
                lw.fc1.at(half + k, j) = -v;
            }
        lw.fc1.at(r0, 0) = lw.ffn_norm[0];
        lw.fc1.at(half + r0, 0) = -lw.ffn_norm[0];
        lw.fc2 = matrix(g.n_ff, 2 * half);
        for (int64_t i = 0; i < g.n_ff; ++i) {
            for (int64_t k = 0; k < r0; ++k) {
                lw.fc2.at(i, k) = f.scale_b * f.b.at(i, k);
                lw.fc2.at(i, half + k) = -f.scale_b * f.b.at(i, k);
            }
            lw.fc2.at(i, r0) = bias[static_cast<size_t>(i)];
            lw.fc2.at(i, half + r0) = -bias[static_cast<size_t>(i)];
        }
        if (opt.predictor_noise > 0.0f) {
            // Independent relative noise on every entry: the two halves no longer cancel, so
            // scores near the threshold change side.
            rng noise = stream_rng(opt.seed, layer, stream::predictor_noise);
            for (float& v : lw.fc2.data)
                v = static_cast<float>(v * (1.0 + opt.predictor_noise * noise.normal()));
        }
    }

    // Scales `weights` (and `out`, which is linear in them) so that out has per-channel RMS
    // `target`, then adds it to the residual.
    static void add_scaled(matrix& h, matrix& out, matrix& weights, double target) {
        const double rms = rms_without_channel0(out);
        const auto factor = static_cast<float>(rms > 0.0 ? target / rms : 1.0);
        weights.scale(factor);
        out.scale(factor);
        for (size_t i = 0; i < h.data.size(); ++i)
            h.data[i] += out.data[i];
    }
};

// ---------------------------------------------------------------- file output

std::vector<uint8_t> encode(std::span<const float> values, ggml_type type) {
    std::vector<uint8_t> bytes;
    if (type == ggml_type::f32) {
        bytes.resize(values.size() * sizeof(float));
        std::memcpy(bytes.data(), values.data(), bytes.size());
        return bytes;
    }
    bytes.resize(values.size() * sizeof(uint16_t));
    for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t half = fp32_to_fp16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &half, sizeof half);
    }
    return bytes;
}

void add_matrix(gguf::writer& w, std::string name, const matrix& m, ggml_type type) {
    const std::array<int64_t, 2> dims{m.cols, m.rows};
    w.add_tensor(std::move(name), type, dims, encode(m.data, type));
}

void add_vector(gguf::writer& w, std::string name, std::span<const float> v) {
    const std::array<int64_t, 1> dims{static_cast<int64_t>(v.size())};
    w.add_tensor(std::move(name), ggml_type::f32, dims, encode(v, ggml_type::f32));
}

void add_layer(gguf::writer& w, const layer_weights& lw, int64_t layer, const synth_options& o) {
    const std::string p = concat("blk.", layer, ".");
    const ggml_type t = o.weight_type;
    add_vector(w, p + "attn_norm.weight", lw.attn_norm);
    add_matrix(w, p + "attn_q.weight", lw.attn_q, t);
    add_matrix(w, p + "attn_k.weight", lw.attn_k, t);
    add_matrix(w, p + "attn_v.weight", lw.attn_v, t);
    add_matrix(w, p + "attn_output.weight", lw.attn_output, t);
    add_vector(w, p + "ffn_norm.weight", lw.ffn_norm);
    add_matrix(w, p + "ffn_gate.weight", lw.ffn_gate, t);
    add_matrix(w, p + "ffn_up.weight", lw.ffn_up, t);
    if (o.sparse) {
        add_matrix(w, p + "ffn_down_t.weight", lw.ffn_down_t, t);
        add_matrix(w, p + "fc1.weight", lw.fc1, t);
        add_matrix(w, p + "fc2.weight", lw.fc2, t);
    } else {
        add_matrix(w, p + "ffn_down.weight", transpose(lw.ffn_down_t), t);
    }
}

void add_metadata(gguf::writer& w, const synth_options& o, const geometry& g) {
    const std::string& a = o.arch;
    w.set_string("general.architecture", a);
    w.set_string("general.name", concat("synthetic-", a, "-", g.n_embd, "x", g.n_layer));
    w.set_u32("general.file_type", o.weight_type == ggml_type::f16 ? 1u : 0u);
    w.set_u32(a + ".context_length", static_cast<uint32_t>(o.n_ctx_train));
    w.set_u32(a + ".embedding_length", static_cast<uint32_t>(g.n_embd));
    w.set_u32(a + ".block_count", static_cast<uint32_t>(g.n_layer));
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(g.n_ff));
    w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(g.n_head));
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(g.n_head_kv));
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", o.rms_eps);
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(g.head_dim));
    w.set_f32(a + ".rope.freq_base", o.rope_freq_base);
    if (o.sparse) w.set_f32("powerinfer.sparse_threshold", 0.0f);
    if (!o.sparse && o.dense_relu) w.set_string("powerinfer.ffn_activation", "relu");
    w.set_u64("powerinfer.synthetic.seed", o.seed);
    w.set_f32("powerinfer.synthetic.sparsity", o.sparsity);
    w.set_f32("powerinfer.synthetic.power_law", o.power_law);
    w.set_f32("powerinfer.synthetic.predictor_noise", o.predictor_noise);
}

} // namespace

void write_synthetic_model(const synth_options& options, const std::string& out_path) {
    validate(options);
    if (out_path.empty()) bad_option("output path is empty");
    const std::unique_ptr<gguf::file> vocab = gguf::file::open(options.vocab_path);
    const auto n_vocab =
        static_cast<int64_t>(vocab->get_string_array("tokenizer.ggml.tokens").size());
    if (n_vocab == 0) fail(status::format, options.vocab_path, ": tokenizer.ggml.tokens is empty");
    const geometry g = make_geometry(options, n_vocab);
    check_size(g);

    gguf::writer w(options.sparse);
    add_metadata(w, options, g);
    for (const auto& [key, v] : vocab->metadata())
        if (std::string_view(key).starts_with("tokenizer.")) w.set(key, v);

    // Residual channel 0 holds the constant C for every token: it is the gate's bias input.
    const builder b{options, g, round_f16(0.5 * std::sqrt(static_cast<double>(g.n_embd - 1)))};
    matrix h(calibration_sequences * calibration_length, g.n_embd);
    {
        matrix embd =
            gaussian(g.n_vocab, g.n_embd, 1.0, stream_rng(options.seed, -1, stream::token_embd));
        for (int64_t v = 0; v < g.n_vocab; ++v)
            embd.at(v, 0) = b.constant;
        rng pick = stream_rng(options.seed, -1, stream::calibration_tokens);
        for (int64_t t = 0; t < h.rows; ++t) {
            const auto token = static_cast<int64_t>(pick.below(static_cast<uint64_t>(g.n_vocab)));
            std::copy_n(embd.row(token), g.n_embd, h.row(t));
        }
        add_matrix(w, "token_embd.weight", embd, options.weight_type);
    }

    for (int64_t layer = 0; layer < g.n_layer; ++layer) {
        layer_weights lw;
        b.attention_block(lw, h, layer);
        b.ffn_block(lw, h, layer);
        add_layer(w, lw, layer, options);
    }

    const std::vector<float> out_norm =
        norm_weights(g.n_embd, stream_rng(options.seed, -1, stream::output_norm));
    const normed hn = rms_norm(h, out_norm, options.rms_eps);
    const double out_std =
        logit_std /
        std::max(1e-6, rms_without_channel0(hn.x) * std::sqrt(static_cast<double>(g.n_embd - 1)));
    matrix output =
        gaussian(g.n_vocab, g.n_embd, out_std, stream_rng(options.seed, -1, stream::output));
    output.zero_column(0);
    add_vector(w, "output_norm.weight", out_norm);
    add_matrix(w, "output.weight", output, options.weight_type);
    w.write(out_path);
}

} // namespace pi
