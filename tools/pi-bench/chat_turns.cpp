#include "chat_turns.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>

#include "tool.h"

namespace pi::bench {

namespace {

using context_ptr = std::unique_ptr<pi_context, decltype(&pi_context_free)>;

constexpr uint32_t words_seed = 2468;
constexpr uint32_t depth_seed = 1357;
// Tokens per pi_decode while filling the cache to a turn's depth (the default n_batch).
constexpr size_t depth_batch = 512;
constexpr char user_prefix[] = "\nUser:";
constexpr char assistant_prefix[] = "\nAssistant:";
// Room per turn beyond its user words and reply: the prefixes, and words of several tokens.
constexpr int turn_slack = 32;

bool failed(const char* what, pi_status status, std::string& message) {
    if (status == PI_OK) return false;
    message = std::string("--chat-turns: ") + what + ": " + pi_status_str(status) + ": " +
              pi_last_error();
    return true;
}

// Tokens whose piece is one word after a space (" the"), and those pieces: n of them make a
// message of about n tokens, and text made of them tokenizes back into the same tokens.
struct vocabulary_words {
    std::vector<std::string> pieces;
    std::vector<bool> is_word; // per token

    explicit vocabulary_words(const pi_model* model)
        : is_word(static_cast<size_t>(pi_n_vocab(model)), false) {
        char piece[64];
        for (pi_token t = 0; t < pi_n_vocab(model); ++t) {
            size_t len = 0;
            if (pi_token_to_piece(model, t, piece, sizeof piece, &len) != PI_OK || len < 3 ||
                len > sizeof piece || piece[0] != ' ')
                continue;
            if (std::all_of(piece + 1, piece + len, [](char c) {
                    return std::isalpha(static_cast<unsigned char>(c)) != 0;
                })) {
                pieces.emplace_back(piece, len);
                is_word[static_cast<size_t>(t)] = true;
            }
        }
    }
};

// The same messages in every repetition.
std::vector<std::string> user_messages(const std::vector<std::string>& words, int turns,
                                       int n_words) {
    std::mt19937 rng(words_seed);
    std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
    std::vector<std::string> messages(static_cast<size_t>(turns));
    for (std::string& m : messages)
        for (int i = 0; i < n_words; ++i)
            m += words[pick(rng)];
    return messages;
}

// Greedy among the word tokens only (a logit bias forbids the others, end-of-generation tokens
// among them): every reply has n_gen tokens, and its text, sent again in the next turn, tokenizes
// into the tokens the cache holds.
struct greedy_sampler {
    std::vector<pi_logit_bias> bias;
    pi_sampler_params params = pi_sampler_default_params();

    explicit greedy_sampler(const vocabulary_words& words) {
        for (size_t t = 0; t < words.is_word.size(); ++t)
            if (!words.is_word[t]) bias.push_back({static_cast<pi_token>(t), -INFINITY});
        params.temperature = 0;
        params.logit_bias = bias.data();
        params.n_logit_bias = bias.size();
    }
};

int append_reply(const char* text, size_t len, void* reply) {
    static_cast<std::string*>(reply)->append(text, len);
    return 1;
}

// The timed samples of one turn, one per repetition.
struct turn_samples {
    std::vector<double> prompt_ms, decode_tps, depth_tps;
};

// One chat from an empty cache: each turn appends its user message to the transcript, sends the
// whole of it and appends the reply. Fills the token counts of `turns` and adds one sample of
// each turn's times.
bool run_chat(pi_context* ctx, const std::vector<std::string>& messages,
              const pi_sampler_params& sampler, int n_gen, std::vector<chat_turn_result>& turns,
              std::vector<turn_samples>& samples, std::string& message) {
    if (failed("pi_kv_truncate", pi_kv_truncate(ctx, 0), message)) return false;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = n_gen;
    gp.sampler_params = &sampler;
    gp.reuse_cache = 1;
    gp.callback = append_reply;
    std::string transcript, reply;
    gp.user_data = &reply;
    for (size_t k = 0; k < messages.size(); ++k) {
        transcript += user_prefix + messages[k] + assistant_prefix;
        reply.clear();
        pi_generate_result r{};
        r.struct_size = sizeof r;
        pi_context_stats_reset(ctx);
        if (failed("pi_generate", pi_generate(ctx, transcript.c_str(), &gp, &r), message))
            return false;
        pi_context_stats stats{};
        stats.struct_size = sizeof stats;
        if (failed("pi_context_stats_get", pi_context_stats_get(ctx, &stats), message))
            return false;
        transcript += reply;
        turns[k].turn = static_cast<int>(k) + 1;
        turns[k].prompt_tokens = r.n_prompt_tokens;
        turns[k].cached_tokens = r.n_cached_tokens;
        turns[k].generated_tokens = r.n_generated_tokens;
        turns[k].decode_bytes_per_token = stats.n_decode_tokens
                                              ? static_cast<double>(stats.decode_bytes) /
                                                    static_cast<double>(stats.n_decode_tokens)
                                              : 0;
        samples[k].prompt_ms.push_back(r.prompt_seconds * 1e3);
        samples[k].decode_tps.push_back(
            r.decode_seconds > 0 ? r.n_generated_tokens / r.decode_seconds : 0);
    }
    return true;
}

// llama-bench's tg at a depth: an empty cache, `depth` random tokens decoded in batches
// (untimed), then n_gen single-token batches; their tokens/s.
bool decode_at_depth(pi_context* ctx, int depth, int n_gen, std::mt19937& rng,
                     std::uniform_int_distribution<pi_token>& token, double& tokens_per_second,
                     std::string& message) {
    if (failed("pi_kv_truncate", pi_kv_truncate(ctx, 0), message)) return false;
    std::vector<pi_token> prompt(static_cast<size_t>(depth));
    for (pi_token& t : prompt)
        t = token(rng);
    for (size_t at = 0; at < prompt.size(); at += depth_batch) {
        const int32_t n = static_cast<int32_t>(std::min(depth_batch, prompt.size() - at));
        const pi_batch batch{n, prompt.data() + at, nullptr, nullptr};
        if (failed("pi_decode", pi_decode(ctx, &batch), message)) return false;
    }
    const double start = tool_seconds();
    for (int i = 0; i < n_gen; ++i) {
        const pi_token t = token(rng);
        const pi_batch batch{1, &t, nullptr, nullptr};
        if (failed("pi_decode", pi_decode(ctx, &batch), message)) return false;
    }
    const double seconds = tool_seconds() - start;
    tokens_per_second = seconds > 0 ? n_gen / seconds : 0;
    return true;
}

} // namespace

bool measure_chat(pi_model* model, const options& o, std::vector<chat_turn_result>& out,
                  std::string& message) {
    const vocabulary_words words(model);
    if (words.pieces.empty()) {
        message = "--chat-turns: the vocabulary has no word pieces to write messages with";
        return false;
    }
    const int n_words = std::max(1, o.n_prompt);
    const int64_t n_ctx =
        int64_t{o.chat_turns} * (2 * int64_t{n_words} + o.n_gen + turn_slack) + ctx_slack;
    if (n_ctx > INT32_MAX) {
        message = "--chat-turns: " + std::to_string(n_ctx) + " KV cache cells needed: too many";
        return false;
    }
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = static_cast<int32_t>(n_ctx);
    cp.n_threads = o.threads;
    pi_context* raw = nullptr;
    const pi_status created = pi_context_create(model, &cp, &raw);
    context_ptr ctx(raw, pi_context_free);
    if (failed("pi_context_create", created, message)) return false;

    const std::vector<std::string> messages = user_messages(words.pieces, o.chat_turns, n_words);
    const greedy_sampler sampler(words);
    const size_t turns = messages.size();
    out.assign(turns, chat_turn_result{});
    std::vector<turn_samples> samples(turns);
    for (int i = 0; i < o.warmup; ++i)
        if (!run_chat(ctx.get(), messages, sampler.params, o.n_gen, out, samples, message))
            return false;
    samples.assign(turns, turn_samples{});
    std::mt19937 rng(depth_seed);
    std::uniform_int_distribution<pi_token> token(0, pi_n_vocab(model) - 1);
    // A chat, then the decode at each turn's depth, in every repetition: a change of load on the
    // machine falls on both alike.
    for (int i = 0; i < o.repetitions; ++i) {
        if (!run_chat(ctx.get(), messages, sampler.params, o.n_gen, out, samples, message))
            return false;
        for (size_t k = 0; k < turns && o.n_gen > 0; ++k) {
            double tps = 0;
            if (!decode_at_depth(ctx.get(), out[k].prompt_tokens, o.n_gen, rng, token, tps,
                                 message))
                return false;
            samples[k].depth_tps.push_back(tps);
        }
    }
    for (size_t k = 0; k < turns; ++k) {
        out[k].prompt_ms = summarize(samples[k].prompt_ms);
        out[k].decode_tokens_per_second = summarize(samples[k].decode_tps);
        out[k].depth_tokens_per_second = summarize(samples[k].depth_tps);
    }
    return true;
}

} // namespace pi::bench
