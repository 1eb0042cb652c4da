#pragma once
// One completion as the scheduler runs it: what the route asks for (checked and tokenized before
// it is queued) and the channel the scheduler streams the reply through.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "powerinfer.h"

namespace pi_server {

struct sampler_deleter {
    void operator()(pi_sampler* s) const noexcept { pi_sampler_free(s); }
};
using sampler_ptr = std::unique_ptr<pi_sampler, sampler_deleter>;

struct generation_request {
    std::vector<pi_token> prompt; // never empty; BOS already in front when the model wants it
    int32_t max_tokens = -1;      // -1: until the slot's context is full
    std::vector<std::string> stop;
    bool ignore_eos = false;
    bool logprobs = false;    // each token_output carries its logprob
    int32_t top_logprobs = 0; // and this many alternatives (0 .. 20)
    sampler_ptr sampler;      // made for the model by the route (pi_sampler_create_for_model)
};

// A generated token and the text it releases. At the end of a reply the text held back (bytes
// of a possible stop string or an unfinished character) comes as one last output with token -1.
struct token_output {
    pi_token token = 0;
    std::string text;     // the complete UTF-8 text it releases (may be empty)
    float logprob = 0.0f; // when the request asked for logprobs
    std::vector<std::pair<pi_token, float>> top; // most likely first
};

enum class finish_reason { none, stop, length, cancelled, error };
const char* finish_reason_name(finish_reason reason) noexcept; // "stop", "length", ...

struct generation_usage {
    int32_t prompt_tokens = 0;
    int32_t cached_tokens = 0; // prompt tokens the slot's cache already held
    int32_t completion_tokens = 0;
    double queued_seconds = 0.0; // submitted until a slot took it
    double prompt_seconds = 0.0; // a slot took it until its first token was sampled
    double decode_seconds = 0.0; // first token until the end
    int32_t slot = -1;
};

// What a route takes from the channel at once: the tokens since its last take and, at the end,
// why it ended.
struct generation_update {
    std::vector<token_output> tokens;
    finish_reason finish = finish_reason::none; // none: more is coming
    std::string error;                          // with finish_reason::error
    generation_usage usage;                     // complete when finish != none
};

// One producer (the scheduler thread) and one consumer (the route's thread).
class generation_channel {
  public:
    void push(token_output token);
    void finish(finish_reason reason, const generation_usage& usage, std::string error = {});

    // Waits up to `timeout` for tokens or the end; moves what came into *update (its tokens
    // replaced). Returns true when anything came or the generation had finished.
    bool take(generation_update& update, std::chrono::milliseconds timeout);

    // The client went away: the scheduler ends the generation at its next step and frees the
    // slot.
    void cancel() noexcept;
    bool cancelled() const noexcept;

  private:
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<token_output> tokens_;
    finish_reason finish_ = finish_reason::none;
    std::string error_;
    generation_usage usage_;
    bool cancelled_ = false;
};

struct generation_job {
    generation_request request;
    generation_channel channel;
    std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

} // namespace pi_server
