#include "scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace pi_server {

namespace {

using clock = std::chrono::steady_clock;

double seconds_between(clock::time_point from, clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

size_t common_prefix(const std::vector<pi_token>& a, const std::vector<pi_token>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t k = 0;
    while (k < n && a[k] == b[k])
        ++k;
    return k;
}

std::runtime_error library_error(const char* what, pi_status status) {
    return std::runtime_error(std::string(what) + ": " + pi_status_str(status) + ": " +
                              pi_last_error());
}

} // namespace

struct scheduler::slot {
    pi_seq_id id = 0;
    std::shared_ptr<generation_job> job; // null: idle
    // The tokens at positions 0 .. cached.size()-1 of this slot's sequence in the cache; they
    // outlive the job so that the next prompt that starts the same way reuses them.
    std::vector<pi_token> cached;
    size_t prompt_done = 0;   // prompt tokens in the cache (reused ones included)
    pi_token next = -1;       // sampled, to be decoded at the next step
    int32_t batch_index = -1; // this step's batch row whose logits are this slot's
    pi_text_stream* text = nullptr;
    uint64_t order = 0;
    uint64_t last_used = 0;
    clock::time_point taken;
    clock::time_point first_token;
    generation_usage usage;

    ~slot() { pi_text_stream_free(text); }
};

scheduler::scheduler(pi_model* model, const scheduler_options& options)
    : model_(model), options_(options) {
    if (options_.n_slots < 1 || options_.n_slots > PI_MAX_SEQUENCES)
        throw std::runtime_error("the number of slots must be in [1, " +
                                 std::to_string(PI_MAX_SEQUENCES) + "]");
    pi_context_params params = pi_context_default_params();
    params.n_ctx = options_.n_ctx;
    params.n_batch = options_.n_batch;
    if (options_.n_threads > 0) params.n_threads = options_.n_threads;
    params.n_seq_max = options_.n_slots;
    if (const pi_status st = pi_context_create(model_, &params, &ctx_); st != PI_OK)
        throw library_error("cannot create the context", st);
    const int32_t n_ctx = pi_context_n_ctx(ctx_);
    n_ctx_slot_ = n_ctx / options_.n_slots;
    n_vocab_ = pi_n_vocab(model_);
    if (n_ctx_slot_ < 2) {
        pi_context_free(ctx_);
        throw std::runtime_error("the context has " + std::to_string(n_ctx) +
                                 " cells: too few for " + std::to_string(options_.n_slots) +
                                 " slots");
    }
    for (int32_t i = 0; i < options_.n_slots; ++i) {
        slots_.push_back(std::make_unique<slot>());
        slots_.back()->id = i;
    }
    counted_.n_slots = options_.n_slots;
    stats_ = counted_;
    thread_ = std::thread([this] { run(); });
}

scheduler::~scheduler() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    work_.notify_all();
    thread_.join();
    slots_.clear();
    pi_context_free(ctx_);
}

submit_result scheduler::submit(std::shared_ptr<generation_job> job) {
    {
        std::lock_guard lock(mutex_);
        if (draining_ || stopping_) return submit_result::draining;
        if (static_cast<int32_t>(queue_.size()) >= options_.max_queue)
            return submit_result::queue_full;
        queue_.push_back(std::move(job));
        stats_.queue_length = static_cast<int32_t>(queue_.size());
        // A free slot and a step of generated tokens only in flight: that step is cut short and
        // done again after the new prompt's step, so the new request does not wait for it.
        if (n_busy_shared_ < options_.n_slots && decode_step_preemptible_.exchange(false))
            pi_context_cancel(ctx_);
    }
    work_.notify_all();
    return submit_result::queued;
}

void scheduler::drain() {
    std::unique_lock lock(mutex_);
    draining_ = true;
    idle_.wait(lock, [&] { return stopping_ || (queue_.empty() && stats_.slots_busy == 0); });
}

scheduler_stats scheduler::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void scheduler::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        take_queued_jobs();
        if (n_busy_ == 0) {
            publish_stats();
            idle_.notify_all();
            work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            continue;
        }
        lock.unlock();
        step();
        lock.lock();
        publish_stats();
    }
    for (auto& s : slots_)
        if (s->job) finish(*s, finish_reason::cancelled);
    for (auto& job : queue_)
        job->channel.finish(finish_reason::cancelled, generation_usage{});
    queue_.clear();
    publish_stats();
    idle_.notify_all();
}

void scheduler::publish_stats() {
    const int32_t queue_length = static_cast<int32_t>(queue_.size());
    counted_.slots_busy = n_busy_;
    n_busy_shared_ = n_busy_;
    counted_.queue_length = queue_length;
    pi_context_stats context_stats{};
    context_stats.struct_size = sizeof context_stats;
    if (pi_context_stats_get(ctx_, &context_stats) == PI_OK)
        counted_.ffn_active_fraction = context_stats.ffn_active_fraction;
    stats_ = counted_;
}

void scheduler::take_queued_jobs() {
    while (!queue_.empty() && n_busy_ < options_.n_slots) {
        std::shared_ptr<generation_job> job = std::move(queue_.front());
        queue_.pop_front();
        if (job->channel.cancelled()) {
            job->channel.finish(finish_reason::cancelled, generation_usage{});
            ++counted_.jobs_cancelled;
            continue;
        }
        const std::vector<pi_token>& prompt = job->request.prompt;
        // The idle slot whose cache shares the longest prefix with the prompt; else the one
        // idle longest, whose cache is the least likely to be wanted again.
        slot* best = nullptr;
        size_t best_prefix = 0;
        for (auto& s : slots_) {
            if (s->job) continue;
            const size_t prefix = common_prefix(s->cached, prompt);
            if (!best || prefix > best_prefix ||
                (prefix == best_prefix && s->last_used < best->last_used)) {
                best = s.get();
                best_prefix = prefix;
            }
        }
        slot& s = *best;
        s.job = std::move(job);
        ++n_busy_;
        s.order = next_order_++;
        s.last_used = s.order;
        s.taken = clock::now();
        s.usage = generation_usage{};
        s.usage.slot = s.id;
        s.usage.queued_seconds = seconds_between(s.job->submitted, s.taken);
        s.usage.prompt_tokens = static_cast<int32_t>(prompt.size());
        s.next = -1;
        s.batch_index = -1;
        pi_text_stream_free(s.text);
        s.text = nullptr;
        if (prompt.empty() || prompt.size() > static_cast<size_t>(n_ctx_slot_)) {
            finish(s, finish_reason::error,
                   "the prompt has " + std::to_string(prompt.size()) +
                       " tokens; a slot holds 1 to " + std::to_string(n_ctx_slot_));
            continue;
        }
        std::vector<const char*> stop;
        for (const std::string& text : s.job->request.stop)
            stop.push_back(text.c_str());
        if (const pi_status st = pi_text_stream_create(model_, stop.data(), stop.size(), &s.text);
            st != PI_OK) {
            finish(s, finish_reason::error, pi_last_error());
            continue;
        }
        // The last prompt token is decoded again when all are cached: its logits start the reply.
        const size_t reused = std::min(best_prefix, prompt.size() - 1);
        pi_kv_seq_remove(ctx_, s.id, static_cast<int32_t>(reused), -1);
        s.cached.resize(reused);
        s.prompt_done = reused;
        s.usage.cached_tokens = static_cast<int32_t>(reused);
        for (const pi_token token : prompt)
            pi_sampler_accept(s.job->request.sampler.get(), token);
    }
    counted_.queue_length = static_cast<int32_t>(queue_.size());
}

void scheduler::step() {
    for (auto& s : slots_)
        if (s->job && s->job->channel.cancelled()) finish(*s, finish_reason::cancelled);

    batch_tokens_.clear();
    batch_pos_.clear();
    batch_seq_.clear();
    batch_logits_.clear();
    const auto add = [&](slot& s, pi_token token, bool logits) {
        batch_tokens_.push_back(token);
        batch_pos_.push_back(static_cast<int32_t>(s.cached.size()));
        batch_seq_.push_back(s.id);
        batch_logits_.push_back(logits ? 1 : 0);
        s.cached.push_back(token);
        if (logits) s.batch_index = static_cast<int32_t>(batch_tokens_.size()) - 1;
    };

    // A step costs about what its tokens cost (on a few cores the arithmetic, not the weights'
    // bytes, bounds a batch of a few tokens), so a prompt that waits for the generating slots'
    // tokens gets its first token late. Prompts therefore go first, alone, every other step: a
    // new request's first token comes after at most the step in flight and its own prompt step,
    // and a long prompt still lets the other streams advance every second step. In the other
    // steps the generating slots come first, one token each, then prompts, oldest job first, in
    // what is left of n_batch.
    std::vector<slot*> active;
    bool any_prompt = false;
    bool any_generating = false;
    for (auto& s : slots_) {
        s->batch_index = -1;
        if (!s->job) continue;
        active.push_back(s.get());
        any_prompt = any_prompt || s->prompt_done < s->job->request.prompt.size();
        any_generating = any_generating || s->next >= 0;
    }
    std::sort(active.begin(), active.end(),
              [](const slot* a, const slot* b) { return a->order < b->order; });
    const bool prompts_only = any_prompt && any_generating && !last_step_prompts_only_;
    last_step_prompts_only_ = prompts_only;
    size_t n_decode_tokens = 0;
    for (slot* s : active)
        if (s->next >= 0 && !prompts_only) {
            add(*s, s->next, true);
            s->next = -1;
            ++n_decode_tokens;
        }
    for (slot* s : active) {
        const std::vector<pi_token>& prompt = s->job->request.prompt;
        if (s->prompt_done >= prompt.size()) continue;
        const size_t room = static_cast<size_t>(options_.n_batch) - batch_tokens_.size();
        const size_t n = std::min(room, prompt.size() - s->prompt_done);
        for (size_t i = 0; i < n; ++i)
            add(*s, prompt[s->prompt_done + i], s->prompt_done + i + 1 == prompt.size());
        s->prompt_done += n;
    }
    if (batch_tokens_.empty()) return;

    pi_seq_batch batch{};
    batch.struct_size = sizeof batch;
    batch.n_tokens = static_cast<int32_t>(batch_tokens_.size());
    batch.tokens = batch_tokens_.data();
    batch.pos = batch_pos_.data();
    batch.seq_id = batch_seq_.data();
    batch.logits = batch_logits_.data();
    // Only a step of generated tokens alone may be preempted, and never twice in a row, so
    // that a stream of arrivals cannot stall the streams.
    const bool preemptible = n_decode_tokens == batch_tokens_.size() && !last_step_preempted_;
    decode_step_preemptible_ = preemptible;
    const auto start = clock::now();
    const pi_status st = pi_context_decode(ctx_, &batch);
    const double seconds = seconds_between(start, clock::now());
    decode_step_preemptible_ = false;
    last_step_preempted_ = st == PI_STATUS_CANCELLED && preemptible;
    if (last_step_preempted_) {
        // The cache forgot the batch: each slot takes its token back for the next step.
        for (size_t i = 0; i < batch_tokens_.size(); ++i) {
            slot& s = *slots_[static_cast<size_t>(batch_seq_[i])];
            s.cached.pop_back();
            s.next = batch_tokens_[i];
            s.batch_index = -1;
        }
        return;
    }
    if (st != PI_OK) {
        // The cache is as before the call: every slot in the batch loses what it added, and its
        // job fails (a retry would fail the same way).
        const std::string message =
            std::string("decoding failed: ") + pi_status_str(st) + ": " + pi_last_error();
        for (slot* s : active) {
            pi_kv_seq_remove(ctx_, s->id, -1, -1);
            s->cached.clear();
            finish(*s, finish_reason::error, message);
        }
        return;
    }
    const size_t n_prompt_tokens = batch_tokens_.size() - n_decode_tokens;
    counted_.steps += 1;
    counted_.prompt_tokens += n_prompt_tokens;
    counted_.prompt_seconds +=
        seconds * static_cast<double>(n_prompt_tokens) / static_cast<double>(batch_tokens_.size());
    counted_.decode_seconds +=
        seconds * static_cast<double>(n_decode_tokens) / static_cast<double>(batch_tokens_.size());

    for (slot* s : active) {
        if (s->batch_index < 0) continue;
        const float* logits = pi_get_logits(ctx_, s->batch_index);
        if (!logits) {
            finish(*s, finish_reason::error, "the decoder returned no logits");
            continue;
        }
        sample(*s, logits);
    }
}

void scheduler::sample(slot& s, const float* logits) {
    generation_request& request = s.job->request;
    if (s.usage.completion_tokens == 0) s.first_token = clock::now();
    if (request.max_tokens >= 0 && s.usage.completion_tokens >= request.max_tokens) {
        finish(s, finish_reason::length);
        return;
    }
    pi_token token = 0;
    if (const pi_status st = pi_sample(request.sampler.get(), logits, n_vocab_, &token);
        st != PI_OK) {
        finish(s, finish_reason::error, std::string("sampling failed: ") + pi_last_error());
        return;
    }
    if (!request.ignore_eos && pi_token_is_eog(model_, token)) {
        finish(s, finish_reason::stop);
        return;
    }
    token_output out;
    out.token = token;
    if (request.logprobs) {
        const int32_t n_top = std::min(request.top_logprobs, n_vocab_);
        std::vector<pi_token> top_tokens(static_cast<size_t>(n_top));
        std::vector<float> top_logprobs(static_cast<size_t>(n_top));
        if (pi_logits_logprobs(logits, n_vocab_, token, n_top, &out.logprob, top_tokens.data(),
                               top_logprobs.data()) == PI_OK)
            for (int32_t i = 0; i < n_top; ++i)
                out.top.emplace_back(top_tokens[static_cast<size_t>(i)],
                                     top_logprobs[static_cast<size_t>(i)]);
    }
    const char* text = nullptr;
    size_t len = 0;
    int32_t stopped = 0;
    if (const pi_status st = pi_text_stream_push(s.text, token, &text, &len, &stopped);
        st != PI_OK) {
        finish(s, finish_reason::error, std::string("detokenizing failed: ") + pi_last_error());
        return;
    }
    out.text.assign(text, len);
    ++s.usage.completion_tokens;
    ++counted_.generated_tokens;
    s.job->channel.push(std::move(out));
    if (stopped) {
        finish(s, finish_reason::stop);
        return;
    }
    const bool out_of_tokens =
        request.max_tokens >= 0 && s.usage.completion_tokens >= request.max_tokens;
    // The sampled token goes to position cached.size(), which must stay inside the slot.
    const bool out_of_context = s.cached.size() >= static_cast<size_t>(n_ctx_slot_);
    if (out_of_tokens || out_of_context) {
        finish(s, finish_reason::length);
        return;
    }
    s.next = token;
}

void scheduler::finish(slot& s, finish_reason reason, std::string error) {
    if (s.text && reason != finish_reason::error && reason != finish_reason::cancelled) {
        const char* text = nullptr;
        size_t len = 0;
        if (pi_text_stream_flush(s.text, &text, &len) == PI_OK && len > 0) {
            token_output tail;
            tail.token = -1;
            tail.text.assign(text, len);
            s.job->channel.push(std::move(tail));
        }
    }
    pi_text_stream_free(s.text);
    s.text = nullptr;
    // A token sampled but never decoded is not in the cache; a prompt cut short by an error is
    // in it only as far as it was decoded.
    s.next = -1;
    const auto now = clock::now();
    if (s.usage.completion_tokens > 0 || reason == finish_reason::length) {
        const auto first = s.usage.completion_tokens > 0 ? s.first_token : now;
        s.usage.prompt_seconds = seconds_between(s.taken, first);
        s.usage.decode_seconds = seconds_between(first, now);
    } else {
        s.usage.prompt_seconds = seconds_between(s.taken, now);
    }
    if (reason == finish_reason::cancelled) ++counted_.jobs_cancelled;
    ++counted_.jobs_finished;
    s.job->channel.finish(reason, s.usage, std::move(error));
    s.job.reset();
    --n_busy_;
}

} // namespace pi_server
