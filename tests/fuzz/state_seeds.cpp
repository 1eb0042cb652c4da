// state_fuzz's seeds: pi_context_state_save's blobs of contexts that decoded a few tokens, with
// the mode byte state_fuzz.cpp reads in front (sampler, sequence, whether the target context is
// busy).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "api_fixture.hpp"
#include "seeds.hpp"

namespace pi::fuzz {

namespace {

// Mode bits of state_fuzz.cpp.
constexpr uint8_t load_seq_0 = 1 << 2;
constexpr uint8_t busy_target = 1 << 4;
constexpr uint8_t stamp_fingerprint = 1 << 5;
uint8_t with_sampler(int kind) {
    return static_cast<uint8_t>(kind + 1);
}

void write_state(const std::filesystem::path& path, uint8_t mode,
                 const std::vector<uint8_t>& blob) {
    write_text(path, mode,
               std::string_view(reinterpret_cast<const char*>(blob.data()), blob.size()));
}

// Decodes `token` in sequence 0 and lets the sampler pick the next, n times.
void generate(pi_model* model, pi_context* ctx, pi_sampler* sampler, pi_token token, int n) {
    const pi_seq_id seq = 0;
    for (int i = 0; i < n; ++i) {
        require_ok(decode(ctx, {&token, 1}, {&seq, 1}, false), "decoding a generated token");
        require_ok(pi_sample(sampler, pi_get_logits(ctx, -1), pi_n_vocab(model), &token),
                   "pi_sample");
    }
}

} // namespace

void write_state_seeds(const std::filesystem::path& dir, const std::string& model_path) {
    const model_ptr model = load_model(model_path);
    {
        // Two sequences, logits for every token of the last batch.
        const context_ptr ctx = make_state_context(model.get());
        const pi_token tokens[] = {1, 10, 20, 1};
        const pi_seq_id seqs[] = {0, 0, 0, 1};
        require_ok(decode(ctx.get(), tokens, seqs, true), "decoding the seeds' prompt");
        write_state(dir / "all-sequences.state", 0, saved_state(ctx.get(), -1, nullptr));
        const std::vector<uint8_t> one = saved_state(ctx.get(), 1, nullptr);
        write_state(dir / "sequence-1.state", load_seq_0, one);
        write_state(dir / "sequence-1-into-busy.state", load_seq_0 | busy_target, one);
    }
    const char* const names[state_sampler_kinds] = {"chain", "grammar", "json-schema"};
    for (int kind = 0; kind < state_sampler_kinds; ++kind) {
        const context_ptr ctx = make_state_context(model.get());
        const sampler_ptr sampler = make_state_sampler(model.get(), kind);
        const pi_token prompt[] = {1, 10};
        const pi_seq_id seqs[] = {0, 0};
        require_ok(decode(ctx.get(), prompt, seqs, false), "decoding the seeds' prompt");
        pi_token next = 0;
        require_ok(
            pi_sample(sampler.get(), pi_get_logits(ctx.get(), -1), pi_n_vocab(model.get()), &next),
            "pi_sample");
        generate(model.get(), ctx.get(), sampler.get(), next, 2);
        write_state(dir / (std::string("sampler-") + names[kind] + ".state"),
                    with_sampler(kind) | stamp_fingerprint,
                    saved_state(ctx.get(), -1, sampler.get()));
    }
}

} // namespace pi::fuzz
