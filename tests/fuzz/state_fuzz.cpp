// Saved context states (docs/state.md) from arbitrary bytes, through pi_context_state_load into a
// fresh context of the tiny sparse Llama model (seeds: states the library saved from that model).
// The first input byte is the mode, the rest the state:
//   bits 0-1  the sampler passed: none (0), or make_state_sampler(kind = bits - 1)
//   bits 2-3  the sequence loaded: -1, 0, 1, -1
//   bit 4     the context already holds tokens of both sequences (cells the load must keep)
//   bit 5     the model fingerprint's place in the state is overwritten with this model's, so
//             that mutations get past that check and committed inputs survive a change of the
//             synthetic model's bytes
// A load that fails must say PI_ERR_FORMAT, PI_ERR_CONTEXT_FULL or PI_ERR_INVALID_ARGUMENT and
// leave the context and the sampler as they were (their saved state is unchanged). After a load
// that succeeds, sampling from the restored logits must not fail but with a status, decoding one
// more token must work (or be PI_ERR_CONTEXT_FULL when the restored cells leave no room), and
// the context's state, saved again, must load into a fresh context.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "api_fixture.hpp"
#include "fuzz_models.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"

namespace {

using namespace pi::fuzz;

pi_model* model() {
    static const model_ptr m = [] {
        pi_log_set([](pi_log_level, const char*, void*) {}, nullptr);
        return load_model(write_tiny_llama(scratch_dir()));
    }();
    return m.get();
}

// The blob's u64 context size, the magic and the version come before the fingerprint.
constexpr size_t fingerprint_at = 8 + 8 + 4;
constexpr size_t fingerprint_size = 8;

const std::vector<uint8_t>& fingerprint() {
    static const std::vector<uint8_t> bytes = [] {
        const context_ptr ctx = make_state_context(model());
        const std::vector<uint8_t> blob = saved_state(ctx.get(), -1, nullptr);
        return std::vector<uint8_t>(blob.begin() + fingerprint_at,
                                    blob.begin() + fingerprint_at + fingerprint_size);
    }();
    return bytes;
}

void fill(pi_context* ctx) {
    const pi_token tokens[] = {1, 10, 1, 30};
    const pi_seq_id seqs[] = {0, 0, 1, 1};
    require_ok(decode(ctx, tokens, seqs, false), "decoding the context's own tokens");
}

void check_sample(pi_sampler* sampler, const float* logits) {
    if (!sampler || !logits) return;
    pi_token token = -1;
    if (pi_sample(sampler, logits, pi_n_vocab(model()), &token) == PI_OK &&
        (token < 0 || token >= pi_n_vocab(model())))
        __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    std::vector<uint8_t> state(data + 1, data + size);
    if ((mode & 32) && state.size() >= fingerprint_at + fingerprint_size)
        std::copy(fingerprint().begin(), fingerprint().end(), state.begin() + fingerprint_at);
    const int kind = (mode & 3) - 1;
    const pi_seq_id seq = ((mode >> 2) & 3) == 3 ? -1 : ((mode >> 2) & 3) - 1;
    const context_ptr ctx = make_state_context(model());
    const sampler_ptr sampler = kind >= 0 ? make_state_sampler(model(), kind) : nullptr;
    if (mode & 16) fill(ctx.get());
    const std::vector<uint8_t> before = saved_state(ctx.get(), -1, sampler.get());

    const pi_status st =
        pi_context_state_load(ctx.get(), seq, sampler.get(), state.data(), state.size());
    if (st != PI_OK) {
        if (st != PI_ERR_FORMAT && st != PI_ERR_CONTEXT_FULL && st != PI_ERR_INVALID_ARGUMENT)
            __builtin_trap();
        if (saved_state(ctx.get(), -1, sampler.get()) != before) __builtin_trap();
        return 0;
    }
    note_accepted();
    check_sample(sampler.get(), pi_get_logits(ctx.get(), -1));
    const pi_token next = 5;
    const pi_seq_id next_seq = seq < 0 ? 0 : seq;
    const pi_status decoded = decode(ctx.get(), {&next, 1}, {&next_seq, 1}, false);
    if (decoded != PI_OK && decoded != PI_ERR_CONTEXT_FULL) __builtin_trap();
    if (decoded == PI_OK) check_sample(sampler.get(), pi_get_logits(ctx.get(), -1));

    const std::vector<uint8_t> again = saved_state(ctx.get(), -1, sampler.get());
    const context_ptr fresh = make_state_context(model());
    const sampler_ptr fresh_sampler = kind >= 0 ? make_state_sampler(model(), kind) : nullptr;
    if (pi_context_state_load(fresh.get(), -1, fresh_sampler.get(), again.data(), again.size()) !=
        PI_OK)
        __builtin_trap();
    return 0;
}
