#pragma once
// Generated text as a reader may see it: complete UTF-8 only, with the bytes that may begin a
// stop string held back, ending at a stop string without its match. pi::generate streams its
// tokens through it, and pi_text_stream gives it to callers with their own decoding loop.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pi {

class text_stream {
  public:
    // Empty stop strings are ignored.
    explicit text_stream(std::vector<std::string> stop);

    // Adds a token's text; returns true when a stop string matched: the text before the match is
    // released and the stream is stopped. Pushing to a stopped stream is a caller's error
    // (pi::error invalid_argument).
    bool push(std::string_view piece);

    // Releases everything held back; an unfinished character at the end becomes U+FFFD. The
    // stream starts over: empty and not stopped.
    void flush();

    // The text the last push or flush released; valid until the next one.
    std::string_view released() const noexcept { return released_; }
    bool stopped() const noexcept { return stopped_; }

  private:
    void release_all();
    void release(size_t n);

    std::vector<std::string> stop_;
    std::string pending_;
    std::string released_;
    bool stopped_ = false;
};

// Length of the longest prefix of `text` that ends on a complete UTF-8 character.
size_t complete_utf8_prefix(std::string_view text) noexcept;

} // namespace pi
