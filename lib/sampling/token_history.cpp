#include "sampling/token_history.hpp"

namespace pi {

void token_history::push(int32_t token) {
    if (capacity_ == 0) return;
    if (ring_.size() < capacity_) {
        ring_.push_back(token);
        size_ = ring_.size();
        return;
    }
    ring_[next_] = token;
    next_ = (next_ + 1) % capacity_;
}

void token_history::clear() noexcept {
    ring_.clear();
    next_ = 0;
    size_ = 0;
}

int32_t token_history::from_end(size_t i) const noexcept {
    if (ring_.size() < capacity_) return ring_[ring_.size() - 1 - i];
    return ring_[(next_ + capacity_ - 1 - i) % capacity_];
}

std::vector<int32_t> token_history::tokens() const {
    std::vector<int32_t> out(size_);
    for (size_t i = 0; i < size_; ++i)
        out[i] = from_end(size_ - 1 - i);
    return out;
}

} // namespace pi
