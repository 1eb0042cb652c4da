#pragma once
// The C API side of the targets that go through libpowerinfer.so (state_fuzz,
// server_request_fuzz) and of pi-make-fuzz-seeds: what state_fuzz loads states into and the
// seeds are saved from. A state's KV part fits only a context with room for its cells, sequences
// and logits rows, and its sampler part only a sampler of the same configuration
// (sampler_state.cpp fingerprints it), so both sides take them from here.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "powerinfer.h"

namespace pi::fuzz {

struct api_deleter {
    void operator()(pi_model* m) const noexcept { pi_model_free(m); }
    void operator()(pi_context* c) const noexcept { pi_context_free(c); }
    void operator()(pi_sampler* s) const noexcept { pi_sampler_free(s); }
};
using model_ptr = std::unique_ptr<pi_model, api_deleter>;
using context_ptr = std::unique_ptr<pi_context, api_deleter>;
using sampler_ptr = std::unique_ptr<pi_sampler, api_deleter>;

// A failed call that no input causes (the fixture's own setup): prints the library's error and
// aborts, so that a broken setup is not mistaken for a rejected input.
void require_ok(pi_status status, const char* what);

model_ptr load_model(const std::string& path);

// 16 cells, batches of at most 4 tokens, 2 sequences, one thread.
context_ptr make_state_context(pi_model* model);

// 0: the default chain with penalties and DRY; 1: a GBNF grammar; 2: a JSON schema with
// mirostat 2.
constexpr int state_sampler_kinds = 3;
sampler_ptr make_state_sampler(const pi_model* model, int kind);

// One batch; seqs[i] is token i's sequence. Logits for every token, or for each sequence's last.
pi_status decode(pi_context* ctx, std::span<const pi_token> tokens, std::span<const pi_seq_id> seqs,
                 bool all_logits);

// pi_context_state_save's blob; aborts when saving fails.
std::vector<uint8_t> saved_state(pi_context* ctx, pi_seq_id seq, const pi_sampler* sampler);

} // namespace pi::fuzz
