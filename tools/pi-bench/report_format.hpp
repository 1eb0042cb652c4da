#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "json.hpp"
#include "runner.hpp"
#include "summary.hpp"

// How the report writes numbers, shared by its tables (report.cpp, report_conversation.cpp).
namespace pi::bench {

// printf of one number.
std::string fmt(const char* format, double value);
// value with that many decimals; "-" when it is not finite.
std::string fixed(double value, int decimals);
// "1.50 GiB", "3.20 MiB", "12.00 KiB".
std::string bytes_binary(double bytes);
// "1.10 B", "3.20 M", "12.00 K".
std::string count_si(double n);
// "median ± stddev".
std::string speed(const summary& s);
// The model column: file label and weight type.
std::string model_cell(const model_facts& m);
// Median, mean, stddev, min, max and the samples as one JSON object.
void json_summary(json_writer& j, const summary& s);
// Each name as a key with its integer value, in order.
void json_integers(json_writer& j, std::initializer_list<std::pair<const char*, uint64_t>> fields);

} // namespace pi::bench
