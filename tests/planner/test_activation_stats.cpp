// Activation statistics: our GGUF format, and PowerInfer's activation_<l>.pt folders (read by
// lib/formats, tested there) against hand-built torch.save bytes (formats/torch_fixture.hpp).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <doctest/doctest.h>

#include "formats/torch_fixture.hpp"
#include "gguf/gguf.hpp"
#include "planner/activation_stats.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using test::code_of;
using test::message_of;
using planner::activation_stats;

std::string in_dir(const std::string& dir, const std::string& name) {
    return (std::filesystem::path(dir) / name).string();
}

} // namespace

TEST_CASE("activation statistics round trip through our GGUF format") {
    const std::string dir = test::scratch_dir("stats_round_trip");
    activation_stats s;
    s.tokens = 123456789012ull;
    s.counts = {{0.0f, 1.5f, 3.0f}, {}, {7.0f, 0.25f}};
    const std::string path = in_dir(dir, "stats.gguf");
    planner::write_activation_stats(path, s);

    const activation_stats back = planner::read_activation_stats(path);
    CHECK(back.tokens == s.tokens);
    CHECK(back.counts == s.counts);
    const auto f = gguf::file::open(path);
    CHECK(f->get_string("general.architecture") == "powerinfer.activation_stats");
    CHECK(f->get_u32("powerinfer.activation_stats.block_count") == 3);
    REQUIRE(f->find_tensor("blk.2.activation_count") != nullptr);
    CHECK(f->find_tensor("blk.2.activation_count")->type == ggml_type::f32);
    CHECK(planner::load_activation_stats(path).counts == s.counts);
}

TEST_CASE("activation statistics files with missing or wrong parts are rejected") {
    const std::string dir = test::scratch_dir("stats_bad");
    const auto write = [&](const std::string& name,
                           const std::function<void(gguf::writer&)>& edit) {
        gguf::writer w(false);
        w.set_string("general.architecture", "powerinfer.activation_stats");
        w.set_u32("powerinfer.activation_stats.block_count", 1);
        w.set_u64("powerinfer.activation_stats.tokens", 10);
        edit(w);
        const std::string path = in_dir(dir, name);
        w.write(path);
        return path;
    };
    const auto f32 = [](std::vector<float> v) {
        std::vector<uint8_t> b(v.size() * 4);
        std::memcpy(b.data(), v.data(), b.size());
        return b;
    };
    const int64_t two[] = {2};

    const std::string missing = write("missing.gguf", [](gguf::writer&) {});
    CHECK(code_of([&] { planner::read_activation_stats(missing); }) == status::format);
    CHECK(message_of([&] {
              planner::read_activation_stats(missing);
          }).find("blk.0.activation_count") != std::string::npos);

    const std::string arch = write("arch.gguf", [&](gguf::writer& w) {
        w.set_string("general.architecture", "llama");
        w.add_tensor("blk.0.activation_count", ggml_type::f32, two, f32({1, 2}));
    });
    CHECK(code_of([&] { planner::read_activation_stats(arch); }) == status::format);

    const std::string negative = write("negative.gguf", [&](gguf::writer& w) {
        w.add_tensor("blk.0.activation_count", ggml_type::f32, two, f32({1, -2}));
    });
    CHECK(message_of([&] { planner::read_activation_stats(negative); }).find("neuron 1") !=
          std::string::npos);

    const std::string nan = write("nan.gguf", [&](gguf::writer& w) {
        w.add_tensor("blk.0.activation_count", ggml_type::f32, two,
                     f32({std::numeric_limits<float>::quiet_NaN(), 1}));
    });
    CHECK(code_of([&] { planner::read_activation_stats(nan); }) == status::format);

    const std::string i32 = write("i32.gguf", [&](gguf::writer& w) {
        w.add_tensor("blk.0.activation_count", ggml_type::i32, two, std::vector<uint8_t>(8, 0));
    });
    CHECK(code_of([&] { planner::read_activation_stats(i32); }) == status::format);

    const std::string no_tokens = in_dir(dir, "no_tokens.gguf");
    {
        gguf::writer w(false);
        w.set_string("general.architecture", "powerinfer.activation_stats");
        w.set_u32("powerinfer.activation_stats.block_count", 1);
        w.add_tensor("blk.0.activation_count", ggml_type::f32, two, f32({1, 2}));
        w.write(no_tokens);
    }
    CHECK(message_of([&] {
              planner::read_activation_stats(no_tokens);
          }).find("powerinfer.activation_stats.tokens") != std::string::npos);

    activation_stats bad;
    bad.counts = {{1.0f, -1.0f}};
    CHECK(code_of([&] { planner::write_activation_stats(in_dir(dir, "w.gguf"), bad); }) ==
          status::invalid_argument);
}

TEST_CASE("PowerInfer activation folders are read in numeric layer order") {
    const std::string dir = test::scratch_dir("activation_folder");
    for (int l = 0; l < 12; ++l) {
        test::torch_file_options o;
        o.archive = "activation_" + std::to_string(l);
        test::write_bytes(in_dir(dir, o.archive + ".pt"),
                          test::torch_file_f32({static_cast<float>(l), 1.0f, 2.0f}, o));
    }
    test::write_bytes(in_dir(dir, "notes.txt"), {'h', 'i'});
    test::write_bytes(in_dir(dir, "activation_x.pt"), {'h', 'i'});
    const activation_stats s = planner::load_activation_stats(dir);
    REQUIRE(s.counts.size() == 12);
    for (int l = 0; l < 12; ++l)
        CHECK(s.counts[static_cast<size_t>(l)][0] == static_cast<float>(l));
    CHECK(s.tokens == 0);

    test::write_bytes(in_dir(dir, "activation_01.pt"), test::torch_file_f32({1.0f}));
    CHECK(message_of([&] { planner::read_powerinfer_activations(dir); }).find("claim layer 1") !=
          std::string::npos);
    std::filesystem::remove(in_dir(dir, "activation_01.pt"));

    std::filesystem::remove(in_dir(dir, "activation_5.pt"));
    CHECK(message_of([&] {
              planner::read_powerinfer_activations(dir);
          }).find("activation_5.pt is missing") != std::string::npos);

    const std::string empty = test::scratch_dir("activation_empty");
    CHECK(code_of([&] { planner::read_powerinfer_activations(empty); }) == status::format);
}

TEST_CASE("a corrupt file in an activation folder is named in the error") {
    const std::string dir = test::scratch_dir("activation_corrupt");
    test::write_bytes(in_dir(dir, "activation_0.pt"), test::torch_file_f32({1.0f}));
    std::vector<uint8_t> cut = test::torch_file_f32({1.0f, 2.0f});
    cut.resize(cut.size() / 2);
    test::write_bytes(in_dir(dir, "activation_1.pt"), cut);
    CHECK(message_of([&] { planner::read_powerinfer_activations(dir); }).find("activation_1.pt") !=
          std::string::npos);

    test::write_bytes(in_dir(dir, "activation_1.pt"), test::torch_file_f32({1.0f, -2.0f}));
    CHECK(code_of([&] { planner::read_powerinfer_activations(dir); }) == status::format);
}
