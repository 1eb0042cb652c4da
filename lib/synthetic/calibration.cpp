#include "synthetic/calibration.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "engine/context.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "platform/files.hpp"
#include "platform/system.hpp"
#include "support/error.hpp"
#include "synthetic/gguf_output.hpp"

namespace pi::synth {
namespace {

// Removes the probe file however the run ends.
struct removed_at_exit {
    std::string path;
    ~removed_at_exit() { platform::remove_file(path); }
};

std::string unique_probe_path(const std::string& out_path) {
    static std::atomic<uint64_t> serial{0};
    return concat(out_path, ".calibration.", platform::process_id(), ".", serial.fetch_add(1));
}

// The engine splits rows across threads, so its results, and the files, do not depend on this.
int32_t engine_threads() {
    const unsigned n = std::thread::hardware_concurrency();
    return static_cast<int32_t>(std::clamp(n, 1u, 16u));
}

void copy_rows(std::span<const float> from, matrix& to, int64_t first_row) {
    std::copy(from.begin(), from.end(), to.row(first_row));
}

// An FFN of one neuron whose weights are all zero: it adds nothing to the residual.
layer_weights idle_ffn(int64_t n_embd) {
    layer_weights idle;
    idle.ffn_norm.assign(static_cast<size_t>(n_embd), 1.0f);
    idle.ffn_gate = matrix(1, n_embd);
    idle.ffn_up = matrix(1, n_embd);
    idle.ffn_down_t = matrix(1, n_embd);
    return idle;
}

} // namespace

layer_probe::layer_probe(const synth_options& o, const geometry& g, std::string out_path)
    : options_(o), geometry_(g), out_path_(std::move(out_path)) {}

void layer_probe::write(const std::string& path, const matrix& h, const layer_weights& lw,
                        bool whole_ffn, const probe_head* head) const {
    geometry g = geometry_;
    if (!whole_ffn) g.n_ff = 1;
    gguf::writer w(false);
    const char* arch = family_named(options_.arch).file_arch;
    w.set_string("general.architecture", arch);
    add_hparams(w, arch, options_, g, 1);
    w.set_string("powerinfer.ffn_activation", "relu");
    // A vocabulary of one token per calibration row; the probe is only ever fed token ids.
    std::vector<std::string> tokens(static_cast<size_t>(h.rows));
    for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = concat("<calibration ", i, ">");
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.unknown_token_id"})
        w.set_u32(key, 0);

    add_matrix(w, "token_embd.weight", h, ggml_type::f32);
    add_attention(w, lw, 0, ggml_type::f32);
    add_ffn(w, whole_ffn ? lw : idle_ffn(g.n_embd), 0, ggml_type::f32, false);
    if (head) {
        add_vector(w, "output_norm.weight", head->norm);
        add_matrix(w, "output.weight", head->rows, ggml_type::f32);
    } else {
        const std::vector<float> ones(static_cast<size_t>(g.n_embd), 1.0f);
        add_vector(w, "output_norm.weight", ones);
        add_matrix(w, "output.weight", matrix(h.rows, g.n_embd), ggml_type::f32);
    }
    w.write(path);
}

matrix layer_probe::attention_residual(const matrix& h, const layer_weights& lw) const {
    return run(h, lw, false, nullptr).input;
}

layer_observation layer_probe::layer(const matrix& h, const layer_weights& lw) const {
    return run(h, lw, true, nullptr);
}

matrix layer_probe::logits(const matrix& h, const layer_weights& lw, const probe_head& head) const {
    return run(h, lw, true, &head).logits;
}

layer_observation layer_probe::run(const matrix& h, const layer_weights& lw, bool whole_ffn,
                                   const probe_head* head) const {
    const removed_at_exit file{unique_probe_path(out_path_)};
    write(file.path, h, lw, whole_ffn, head);
    const std::unique_ptr<model> m = model::load(file.path, load_options{});

    const int64_t n_ff = m->hp().n_ff;
    layer_observation seen{matrix(h.rows, geometry_.n_embd), matrix(h.rows, n_ff), matrix()};
    if (head) seen.logits = matrix(h.rows, head->rows.rows);
    context_options co;
    co.n_ctx = static_cast<int32_t>(calibration_length);
    co.n_batch = static_cast<int32_t>(calibration_length);
    co.n_threads = engine_threads();
    co.kv_f16 = false;
    std::vector<int32_t> tokens(static_cast<size_t>(calibration_length));
    const std::vector<int8_t> all_logits(tokens.size(), 1);
    for (int64_t s = 0; s < calibration_sequences; ++s) {
        const int64_t first = s * calibration_length;
        for (size_t p = 0; p < tokens.size(); ++p)
            tokens[p] = static_cast<int32_t>(first + static_cast<int64_t>(p));
        // A fresh context per sequence: the sequences must not see each other's keys.
        context ctx(*m, co);
        int64_t row = first;
        ctx.set_ffn_observer([&](const ffn_observation& o) {
            // More rows than the sequence holds would overrun `seen`: stop, and fail below.
            if (row + o.n_tokens > first + calibration_length) return false;
            copy_rows(o.input, seen.input, row);
            copy_rows(o.activation, seen.activation, row);
            row += o.n_tokens;
            return true;
        });
        batch_view batch;
        batch.tokens = tokens;
        if (head) batch.logits = all_logits;
        try {
            ctx.decode(batch);
        } catch (const error& e) {
            if (e.code() != status::cancelled) throw;
        }
        if (row != first + calibration_length)
            fail(status::internal, "calibration: the engine did not observe the ",
                 calibration_length, " tokens of a calibration sequence one layer each");
        for (int64_t p = 0; head && p < calibration_length; ++p)
            copy_rows(ctx.logits(static_cast<int32_t>(p)), seen.logits, first + p);
    }
    return seen;
}

} // namespace pi::synth
