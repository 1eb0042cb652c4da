#include "api_fixture.hpp"

#include <cstdio>
#include <cstdlib>

namespace pi::fuzz {

void require_ok(pi_status status, const char* what) {
    if (status == PI_OK) return;
    std::fprintf(stderr, "pi-fuzz: %s: %s: %s\n", what, pi_status_str(status), pi_last_error());
    std::abort();
}

model_ptr load_model(const std::string& path) {
    const pi_model_params params = pi_model_default_params();
    pi_model* m = nullptr;
    require_ok(pi_model_load(path.c_str(), &params, &m), "pi_model_load");
    return model_ptr(m);
}

context_ptr make_state_context(pi_model* model) {
    pi_context_params p = pi_context_default_params();
    p.n_ctx = 16;
    p.n_batch = 4;
    p.n_threads = 1;
    p.n_seq_max = 2;
    pi_context* ctx = nullptr;
    require_ok(pi_context_create(model, &p, &ctx), "pi_context_create");
    return context_ptr(ctx);
}

sampler_ptr make_state_sampler(const pi_model* model, int kind) {
    pi_sampler_params p = pi_sampler_default_params();
    p.seed = 7;
    if (kind == 0) {
        p.repeat_penalty = 1.1f;
        p.penalty_last_n = 8;
        p.dry_multiplier = 0.5f;
    } else if (kind == 1) {
        // Lowercase words: the tiny vocabulary's byte tokens and merges can spell them.
        p.grammar = "root ::= word (\" \" word)* \".\"?\nword ::= [a-z]{1,8}\n";
    } else {
        p.mirostat = 2;
        p.json_schema = R"({"type": "object", "properties": {"n": {"type": "integer"},
            "s": {"type": "string", "maxLength": 4}}, "required": ["n"]})";
    }
    pi_sampler* s = nullptr;
    require_ok(pi_sampler_create_for_model(model, &p, &s), "pi_sampler_create_for_model");
    return sampler_ptr(s);
}

pi_status decode(pi_context* ctx, std::span<const pi_token> tokens, std::span<const pi_seq_id> seqs,
                 bool all_logits) {
    const std::vector<int8_t> logits(tokens.size(), 1);
    pi_seq_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = static_cast<int32_t>(tokens.size());
    b.tokens = tokens.data();
    b.seq_id = seqs.data();
    b.logits = all_logits ? logits.data() : nullptr;
    return pi_context_decode(ctx, &b);
}

std::vector<uint8_t> saved_state(pi_context* ctx, pi_seq_id seq, const pi_sampler* sampler) {
    size_t len = 0;
    require_ok(pi_context_state_save(ctx, seq, sampler, nullptr, 0, &len), "state size");
    std::vector<uint8_t> blob(len);
    require_ok(pi_context_state_save(ctx, seq, sampler, blob.data(), blob.size(), &len),
               "pi_context_state_save");
    return blob;
}

} // namespace pi::fuzz
