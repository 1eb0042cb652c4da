#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "tool_args.h"

extern "C" const char tool_name[] = "tool-test";

namespace {

// argv of "tool-test ARGS...", owning its strings.
class command_line {
  public:
    command_line(std::initializer_list<const char*> args) : storage_{"tool-test"} {
        storage_.insert(storage_.end(), args.begin(), args.end());
        for (std::string& s : storage_)
            argv_.push_back(s.data());
    }

    tool_args start() {
        return tool_args_start(static_cast<int>(argv_.size()), argv_.data(), "usage: tool-test\n");
    }

    // A cursor on the first argument, the option whose value a test reads.
    tool_args at_option() {
        tool_args a = start();
        REQUIRE(tool_args_next(&a));
        return a;
    }

  private:
    std::vector<std::string> storage_;
    std::vector<char*> argv_;
};

int int_of(std::initializer_list<const char*> args, int lo, int hi, std::string& message) {
    command_line c(args);
    tool_args a = c.at_option();
    int v = -12345;
    const bool ok = tool_args_int(&a, lo, hi, &v) != 0;
    CHECK(ok == !a.failed);
    message = a.message;
    return ok ? v : -12345;
}

} // namespace

TEST_CASE("flags, values and positional arguments come in order; a value may look like an option") {
    command_line c({"--json", "-m", "model.gguf", "IN", "-", "--prompt", "--json", "-n", "-1"});
    tool_args a = c.start();
    std::vector<std::string> seen;
    int n = 0;
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, nullptr, "--json"))
            seen.push_back("json");
        else if (tool_args_is(&a, "-m", "--model"))
            seen.push_back(std::string("model=") + tool_args_text(&a));
        else if (tool_args_is(&a, "-p", "--prompt"))
            seen.push_back(std::string("prompt=") + tool_args_text(&a));
        else if (tool_args_is(&a, "-n", "--n-predict")) {
            tool_args_int(&a, -1, 100, &n);
            seen.push_back("n=" + std::to_string(n));
        } else if (!tool_args_is_option(&a))
            seen.push_back(std::string("positional=") + a.arg);
        else
            tool_args_unknown(&a);
    }
    CHECK(seen == std::vector<std::string>{"json", "model=model.gguf", "positional=IN",
                                           "positional=-", "prompt=--json", "n=-1"});
    CHECK(tool_args_finish(&a) == 0);
}

TEST_CASE("good integers within the bounds, the bounds included, with an optional sign") {
    std::string message;
    CHECK(int_of({"-t", "8"}, 1, 1024, message) == 8);
    CHECK(int_of({"-t", "1"}, 1, 1024, message) == 1);
    CHECK(int_of({"-t", "1024"}, 1, 1024, message) == 1024);
    CHECK(int_of({"-t", "+3"}, 1, 1024, message) == 3);
    CHECK(int_of({"-n", "-2147483648"}, INT32_MIN, INT32_MAX, message) == INT32_MIN);
    CHECK(message.empty());

    command_line seed({"-s", "4294967295"});
    tool_args a = seed.at_option();
    int64_t s = 0;
    CHECK(tool_args_int64(&a, INT32_MIN, UINT32_MAX, &s));
    CHECK(s == 4294967295LL);

    command_line big({"--seed", "18446744073709551615"});
    a = big.at_option();
    uint64_t u = 0;
    CHECK(tool_args_uint64(&a, 0, UINT64_MAX, &u));
    CHECK(u == UINT64_MAX);
}

TEST_CASE("good numbers: decimals, exponents and the bounds") {
    command_line c({"--temp", "0.25", "--budget", "1e6", "--x", "-.5"});
    tool_args a = c.start();
    float temp = 0;
    double budget = 0, x = 0;
    REQUIRE(tool_args_next(&a));
    CHECK(tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &temp));
    REQUIRE(tool_args_next(&a));
    CHECK(tool_args_double(&a, 0, 1e6, &budget));
    REQUIRE(tool_args_next(&a));
    CHECK(tool_args_double(&a, -1, 1, &x));
    CHECK(!tool_args_next(&a));
    CHECK(temp == 0.25f);
    CHECK(budget == 1e6);
    CHECK(x == -0.5);
    CHECK(tool_args_finish(&a) == 0);
}

TEST_CASE("an option without its value: 'needs a value', and the loop ends") {
    for (const char* option : {"-m", "-t"}) {
        command_line c({"--json", option});
        tool_args a = c.start();
        REQUIRE(tool_args_next(&a));
        REQUIRE(tool_args_next(&a));
        int v = 7;
        if (std::string(option) == "-m")
            CHECK(tool_args_text(&a) == nullptr);
        else
            CHECK(!tool_args_int(&a, 0, 10, &v));
        CHECK(v == 7);
        CHECK(a.failed);
        CHECK(std::string(a.message) == std::string(option) + ": needs a value");
        CHECK(!tool_args_next(&a));
        CHECK(tool_args_finish(&a) == 2);
    }
}

TEST_CASE("out of range: the bounds and what was given") {
    std::string message;
    int_of({"-r", "0"}, 1, 16777216, message);
    CHECK(message == "-r: expects an integer in [1, 16777216], got '0'");
    int_of({"-t", "1025"}, 1, 1024, message);
    CHECK(message == "-t: expects an integer in [1, 1024], got '1025'");
    int_of({"-n", "2147483648"}, INT32_MIN, INT32_MAX, message);
    CHECK(message == "-n: expects an integer in [-2147483648, 2147483647], got '2147483648'");

    command_line huge({"--seed", "18446744073709551616"});
    tool_args a = huge.at_option();
    uint64_t u = 0;
    CHECK(!tool_args_uint64(&a, 0, UINT64_MAX, &u));
    CHECK(std::string(a.message) ==
          "--seed: expects an integer in [0, 18446744073709551615], got '18446744073709551616'");

    command_line negative({"--vram-budget", "-1"});
    a = negative.at_option();
    double d = 0;
    CHECK(!tool_args_double(&a, 0, 1e6, &d));
    CHECK(std::string(a.message) == "--vram-budget: expects a number in [0, 1e+06], got '-1'");

    // Finite as a double, infinite as a float.
    command_line too_big({"--temp", "1e39"});
    a = too_big.at_option();
    float f = 0;
    CHECK(!tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &f));
    CHECK(std::string(a.message) == "--temp: expects a finite number, got '1e39'");
}

TEST_CASE("garbage is refused whole: no prefix, no space, no fraction, no infinity") {
    for (const char* text : {"abc", "", " 5", "5 ", "5x", "1.5", "0x10", "-", "+"}) {
        std::string message;
        int_of({"-n", text}, -100, 100, message);
        CHECK(message == std::string("-n: expects an integer in [-100, 100], got '") + text + "'");
    }
    for (const char* text : {"-1", "+-1", " 1", "abc"}) {
        command_line c({"--seed", text});
        tool_args a = c.at_option();
        uint64_t u = 42;
        CHECK(!tool_args_uint64(&a, 0, UINT64_MAX, &u));
        CHECK(u == 42);
    }
    for (const char* text : {"abc", "", " 1", "1,5", "nan", "inf", "-inf", "1e400"}) {
        command_line c({"--temp", text});
        tool_args a = c.at_option();
        double d = 3;
        CHECK(!tool_args_double(&a, -HUGE_VAL, HUGE_VAL, &d));
        CHECK(d == 3);
        CHECK(std::string(a.message) ==
              std::string("--temp: expects a finite number, got '") + text + "'");
    }
}

TEST_CASE("the first usage error is the one reported; unknown options name themselves") {
    command_line c({"--bogus", "-t", "0"});
    tool_args a = c.start();
    REQUIRE(tool_args_next(&a));
    tool_args_unknown(&a);
    CHECK(std::string(a.message) == "--bogus: unknown option (see --help)");
    CHECK(!tool_args_next(&a));
    tool_args_fail(&a, "-m: a model path is required");
    CHECK(std::string(a.message) == "--bogus: unknown option (see --help)");
    CHECK(tool_args_finish(&a) == 2);
}

#if !defined(_WIN32) // fork() and pipes are POSIX
TEST_CASE("-h and --help print the usage text on stdout and exit with status 0") {
    for (const char* help : {"-h", "--help"}) {
        int out[2];
        REQUIRE(pipe(out) == 0);
        std::fflush(nullptr); // else the child's exit would write this process's buffers too
        const pid_t child = fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            dup2(out[1], STDOUT_FILENO);
            command_line c({"--json", help, "--bogus"});
            tool_args a = c.start();
            while (tool_args_next(&a)) {
            }
            _exit(99); // not reached: the help ends the program
        }
        close(out[1]);
        std::string printed;
        char buffer[256];
        for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;)
            printed.append(buffer, static_cast<size_t>(n));
        close(out[0]);
        int status = 0;
        REQUIRE(waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(printed == "usage: tool-test\n");
    }
}
#endif
