#pragma once

#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace pi::bench {

// Streams one JSON document to a FILE, inserting commas and indentation; keys and values are
// written in the order they are given.
class json_writer {
  public:
    explicit json_writer(std::FILE* out) : out_(out) {}

    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    void key(std::string_view name);
    void string(std::string_view text);
    void number(double value); // non-finite values become null
    void integer(uint64_t value);
    void boolean(bool value);
    void null();

  private:
    void before_value();
    void newline();
    void escaped(std::string_view text);

    std::FILE* out_;
    std::vector<bool> first_in_level_; // one entry per open object/array
    bool after_key_ = false;
};

} // namespace pi::bench
