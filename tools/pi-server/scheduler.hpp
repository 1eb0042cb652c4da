#pragma once
// Continuous batching: one thread owns the context and runs steps; each step is one
// pi_context_decode over every active slot (one token for each generating slot, a chunk of
// prompt for each slot that is reading one), then samples for every slot that got logits. A
// queued job takes a free slot at the next step, preferring the one whose cached tokens share the
// longest prefix with its prompt (those are not decoded again).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "generation.hpp"
#include "powerinfer.h"

namespace pi_server {

struct scheduler_options {
    int32_t n_slots = 1;    // sequences decoded together (-np)
    int32_t n_ctx = 0;      // cache cells in all; each slot gets n_ctx / n_slots positions
    int32_t n_batch = 512;  // most tokens per step
    int32_t n_threads = 0;  // 0: the library's default
    int32_t max_queue = 64; // jobs waiting for a slot beyond which submit says queue_full
};

// Counters for /metrics, read from any thread.
struct scheduler_stats {
    int32_t n_slots = 0;
    int32_t slots_busy = 0;
    int32_t queue_length = 0;
    uint64_t prompt_tokens = 0; // decoded prompt tokens (cached ones not counted)
    uint64_t generated_tokens = 0;
    double prompt_seconds = 0.0; // busy time of steps, split by their tokens
    double decode_seconds = 0.0;
    uint64_t steps = 0;
    double ffn_active_fraction = 0.0; // of the tokens decoded so far
    uint64_t jobs_finished = 0;
    uint64_t jobs_cancelled = 0;
};

enum class submit_result { queued, queue_full, draining };

class scheduler {
  public:
    // Creates the context (n_seq_max = n_slots); throws std::runtime_error with
    // pi_last_error()'s text when it cannot.
    scheduler(pi_model* model, const scheduler_options& options);
    ~scheduler(); // stops the thread; unfinished jobs end as cancelled

    scheduler(const scheduler&) = delete;
    scheduler& operator=(const scheduler&) = delete;

    submit_result submit(std::shared_ptr<generation_job> job);

    // Takes no more jobs (submit says draining) and returns when every queued and running job
    // has finished.
    void drain();

    scheduler_stats stats() const;
    int32_t n_ctx_per_slot() const noexcept { return n_ctx_slot_; }
    int32_t n_slots() const noexcept { return options_.n_slots; }

  private:
    struct slot;
    void run();
    void take_queued_jobs(); // with mutex_ held
    void step();             // one decode over every active slot, then their samples
    void sample(slot& s, const float* logits);
    void finish(slot& s, finish_reason reason, std::string error = {});
    void publish_stats();

    pi_model* model_;
    scheduler_options options_;
    pi_context* ctx_ = nullptr;
    int32_t n_ctx_slot_ = 0;
    int32_t n_vocab_ = 0;
    std::vector<std::unique_ptr<slot>> slots_;
    uint64_t next_order_ = 0; // the order slots took their jobs in
    int32_t n_busy_ = 0;      // scheduler thread only
    bool last_step_prompts_only_ = false;
    bool last_step_preempted_ = false;
    // Set by the scheduler thread around a step that submit() may cut short.
    std::atomic<bool> decode_step_preemptible_{false};
    int32_t n_busy_shared_ = 0; // n_busy_ as of the last step, under mutex_
    // What the scheduler thread counts; copied into stats_ after each step.
    scheduler_stats counted_;
    // This step's batch, reused.
    std::vector<pi_token> batch_tokens_;
    std::vector<int32_t> batch_pos_;
    std::vector<pi_seq_id> batch_seq_;
    std::vector<int8_t> batch_logits_;

    mutable std::mutex mutex_;
    std::condition_variable work_;
    std::condition_variable idle_;
    std::deque<std::shared_ptr<generation_job>> queue_;
    bool draining_ = false;
    bool stopping_ = false;
    scheduler_stats stats_;
    std::thread thread_;
};

} // namespace pi_server
