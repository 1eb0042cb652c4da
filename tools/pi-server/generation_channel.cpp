#include "generation.hpp"

namespace pi_server {

const char* finish_reason_name(finish_reason reason) noexcept {
    switch (reason) {
    case finish_reason::stop:
        return "stop";
    case finish_reason::length:
        return "length";
    case finish_reason::cancelled:
        return "cancelled";
    case finish_reason::error:
        return "error";
    case finish_reason::none:
        break;
    }
    return "none";
}

void generation_channel::push(token_output token) {
    {
        std::lock_guard lock(mutex_);
        tokens_.push_back(std::move(token));
    }
    changed_.notify_all();
}

void generation_channel::finish(finish_reason reason, const generation_usage& usage,
                                std::string error) {
    {
        std::lock_guard lock(mutex_);
        finish_ = reason;
        usage_ = usage;
        error_ = std::move(error);
    }
    changed_.notify_all();
}

bool generation_channel::take(generation_update& update, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout,
                      [&] { return !tokens_.empty() || finish_ != finish_reason::none; });
    update.tokens.clear();
    update.tokens.swap(tokens_);
    update.finish = finish_;
    if (finish_ != finish_reason::none) {
        update.error = error_;
        update.usage = usage_;
    }
    return !update.tokens.empty() || finish_ != finish_reason::none;
}

void generation_channel::cancel() noexcept {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
}

bool generation_channel::cancelled() const noexcept {
    std::lock_guard lock(mutex_);
    return cancelled_;
}

} // namespace pi_server
