#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bandwidth.hpp"
#include "options.hpp"
#include "runner.hpp"

namespace pi::bench {

struct report {
    std::string date;
    std::string cpu;
    unsigned logical_cpus = 0;
    std::string library;     // first line of pi_system_info()
    std::string command;     // argv joined by spaces
    std::string load_before; // load averages when the benchmark started
    std::optional<bandwidth_result> bandwidth;
    options opts;
    std::vector<run_result> runs;
    std::vector<std::string> notes; // skipped model/mode pairs
};

void print_markdown(const report& r, std::FILE* out);
void print_json(const report& r, std::FILE* out);

} // namespace pi::bench
