#include "json.hpp"

#include <cmath>

namespace pi::bench {

void json_writer::newline() {
    std::fputc('\n', out_);
    for (size_t i = 0; i < first_in_level_.size(); ++i)
        std::fputs("  ", out_);
}

void json_writer::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (first_in_level_.empty()) return;
    if (!first_in_level_.back()) std::fputc(',', out_);
    first_in_level_.back() = false;
    newline();
}

void json_writer::begin_object() {
    before_value();
    std::fputc('{', out_);
    first_in_level_.push_back(true);
}

void json_writer::end_object() {
    const bool empty = first_in_level_.back();
    first_in_level_.pop_back();
    if (!empty) newline();
    std::fputc('}', out_);
    if (first_in_level_.empty()) std::fputc('\n', out_);
}

void json_writer::begin_array() {
    before_value();
    std::fputc('[', out_);
    first_in_level_.push_back(true);
}

void json_writer::end_array() {
    const bool empty = first_in_level_.back();
    first_in_level_.pop_back();
    if (!empty) newline();
    std::fputc(']', out_);
}

void json_writer::key(std::string_view name) {
    before_value();
    escaped(name);
    std::fputs(": ", out_);
    after_key_ = true;
}

void json_writer::escaped(std::string_view text) {
    std::fputc('"', out_);
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            std::fputc('\\', out_);
            std::fputc(c, out_);
        } else if (u < 0x20) {
            std::fprintf(out_, "\\u%04x", u);
        } else {
            std::fputc(c, out_);
        }
    }
    std::fputc('"', out_);
}

void json_writer::string(std::string_view text) {
    before_value();
    escaped(text);
}

void json_writer::number(double value) {
    before_value();
    if (std::isfinite(value))
        std::fprintf(out_, "%.6g", value);
    else
        std::fputs("null", out_);
}

void json_writer::integer(uint64_t value) {
    before_value();
    std::fprintf(out_, "%llu", static_cast<unsigned long long>(value));
}

void json_writer::boolean(bool value) {
    before_value();
    std::fputs(value ? "true" : "false", out_);
}

void json_writer::null() {
    before_value();
    std::fputs("null", out_);
}

} // namespace pi::bench
