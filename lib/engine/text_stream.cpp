#include "engine/text_stream.hpp"

#include <algorithm>
#include <utility>

#include "support/error.hpp"

namespace pi {

size_t complete_utf8_prefix(std::string_view text) noexcept {
    // Look back at most 3 bytes for the lead byte of a possibly unfinished character.
    const size_t n = text.size();
    for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
        const auto c = static_cast<unsigned char>(text[n - back]);
        if ((c & 0xC0u) == 0x80u) continue; // continuation byte
        size_t need = 1;
        if ((c & 0xE0u) == 0xC0u)
            need = 2;
        else if ((c & 0xF0u) == 0xE0u)
            need = 3;
        else if ((c & 0xF8u) == 0xF0u)
            need = 4;
        return back < need ? n - back : n;
    }
    return n;
}

text_stream::text_stream(std::vector<std::string> stop) : stop_(std::move(stop)) {
    std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

bool text_stream::push(std::string_view piece) {
    if (stopped_)
        fail(status::invalid_argument,
             "the text stream ended at a stop string and takes no more tokens until it is "
             "flushed");
    released_.clear();
    pending_.append(piece);
    for (const std::string& s : stop_) {
        const size_t at = pending_.find(s);
        if (at != std::string::npos) {
            pending_.resize(at);
            release_all();
            stopped_ = true;
            return true;
        }
    }
    // The longest tail of the pending text that is a proper prefix of some stop string waits.
    size_t hold = 0;
    for (const std::string& s : stop_)
        for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
            if (std::string_view(pending_).substr(pending_.size() - len) ==
                std::string_view(s).substr(0, len)) {
                hold = len;
                break;
            }
    release(complete_utf8_prefix(std::string_view(pending_).substr(0, pending_.size() - hold)));
    return false;
}

void text_stream::flush() {
    released_.clear();
    release_all();
    stopped_ = false;
}

void text_stream::release_all() {
    const size_t whole = complete_utf8_prefix(pending_);
    if (whole < pending_.size()) {
        pending_.resize(whole);
        pending_.append("\xEF\xBF\xBD");
    }
    release(pending_.size());
}

void text_stream::release(size_t n) {
    released_.append(pending_, 0, n);
    pending_.erase(0, n);
}

} // namespace pi
