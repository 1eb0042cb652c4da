#pragma once
// The tokens a sampler has accepted, newest last: a ring of the last `capacity` tokens, or every
// token when the capacity is unbounded (a last_n of -1).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace pi {

class token_history {
  public:
    static constexpr size_t unbounded = SIZE_MAX;

    explicit token_history(size_t capacity = 0) : capacity_(capacity) {}

    void push(int32_t token);
    void clear() noexcept;
    size_t size() const noexcept { return size_; }
    size_t capacity() const noexcept { return capacity_; }
    // How many of the newest tokens a stage looking back `last_n` tokens (-1: all) sees.
    size_t window(int32_t last_n) const noexcept {
        return last_n < 0 ? size_ : std::min(size_, static_cast<size_t>(last_n));
    }
    // The i-th newest token: from_end(0) is the last one accepted.
    int32_t from_end(size_t i) const noexcept;
    // Oldest first.
    std::vector<int32_t> tokens() const;

  private:
    size_t capacity_;
    std::vector<int32_t> ring_;
    size_t next_ = 0; // slot of the next push once the ring is full
    size_t size_ = 0;
};

} // namespace pi
