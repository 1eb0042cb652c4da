// Activation statistics: our GGUF format, and PowerInfer's activation_<l>.pt folders read through
// the zip + pickle subset, against hand-built torch.save bytes (torch_fixture.hpp).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "planner/activation_stats.hpp"
#include "planner/torch_tensor.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "torch_fixture.hpp"

namespace {

using namespace pi;
using planner::activation_stats;
using planner::read_torch_vector;

status code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return e.code();
    }
    return status::ok;
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return e.what();
    }
    return {};
}

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

TEST_CASE("a float32 torch.save tensor is read without Python") {
    const std::vector<float> values = {0.0f, 1.0f, 2.5f, 1e6f, 3.25f};
    const std::vector<uint8_t> file = test::torch_file_f32(values);
    CHECK(read_torch_vector(file, "t.pt") == values);

    test::torch_file_options old;
    old.version_first = true;
    old.archive = "activation_3";
    CHECK(read_torch_vector(test::torch_file_f32(values, old), "old.pt") == values);

    test::torch_file_options plain;
    plain.zip.zip64_end = false;
    plain.zip.align64 = false;
    CHECK(read_torch_vector(test::torch_file_f32(values, plain), "plain.pt") == values);
}

TEST_CASE("an int64 torch.save tensor is read as float counts") {
    const std::vector<int64_t> values = {0, 7, 70000, int64_t{1} << 40, 255, 256};
    const std::vector<float> got = read_torch_vector(test::torch_file_i64(values), "long.pt");
    REQUIRE(got.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i)
        CHECK(got[i] == static_cast<float>(values[i]));
}

TEST_CASE("a torch tensor viewing part of its storage reads the view") {
    std::vector<uint8_t> storage(10 * 4);
    for (int i = 0; i < 10; ++i) {
        const float v = static_cast<float>(i);
        std::memcpy(storage.data() + 4 * i, &v, 4);
    }
    const auto file = test::torch_file("FloatStorage", storage, 10, 2, 5);
    CHECK(read_torch_vector(file, "view.pt") == std::vector<float>{2, 3, 4, 5, 6});

    const auto outside = test::torch_file("FloatStorage", storage, 10, 8, 5);
    CHECK(code_of([&] { read_torch_vector(outside, "outside.pt"); }) == status::format);
    const auto short_storage = test::torch_file("FloatStorage", storage, 11, 0, 5);
    CHECK(code_of([&] { read_torch_vector(short_storage, "short.pt"); }) == status::format);
}

TEST_CASE("half, int32 and byte storages convert to float") {
    const std::vector<uint8_t> half = {0x00, 0x3c, 0x00, 0x40}; // 1.0, 2.0
    CHECK(read_torch_vector(test::torch_file("HalfStorage", half, 2, 0, 2), "h.pt") ==
          std::vector<float>{1.0f, 2.0f});
    const std::vector<uint8_t> i32 = {5, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f};
    CHECK(read_torch_vector(test::torch_file("IntStorage", i32, 2, 0, 2), "i.pt") ==
          std::vector<float>{5.0f, 2147483647.0f});
    CHECK(read_torch_vector(test::torch_file("ByteStorage", {3, 200}, 2, 0, 2), "b.pt") ==
          std::vector<float>{3.0f, 200.0f});
    CHECK(code_of([&] {
              read_torch_vector(test::torch_file("ComplexFloatStorage", {}, 0, 0, 0), "c.pt");
          }) == status::unsupported);
}

TEST_CASE("compressed torch records are unsupported, not misread") {
    test::torch_file_options o;
    o.data_method = 8;
    const std::string msg = message_of([&] {
        read_torch_vector(test::torch_file_f32({1, 2}, o), "z.pt");
    });
    CHECK(msg.find("z.pt") != std::string::npos);
    CHECK(msg.find("compressed") != std::string::npos);
    CHECK(code_of([&] {
              read_torch_vector(test::torch_file_f32({1, 2}, o), "z.pt");
          }) == status::unsupported);
    o.data_method = 0;
    o.pickle_method = 8;
    CHECK(code_of([&] {
              read_torch_vector(test::torch_file_f32({1, 2}, o), "z.pt");
          }) == status::unsupported);
}

TEST_CASE("every truncation of a torch file is an error, never a crash") {
    const std::vector<uint8_t> file = test::torch_file_f32({1, 2, 3, 4});
    for (size_t n = 0; n < file.size(); ++n) {
        const std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<long>(n));
        const status s = code_of([&] { read_torch_vector(cut, "cut.pt"); });
        INFO("length " << n);
        CHECK((s == status::format || s == status::unsupported));
    }
}

TEST_CASE("corrupt bytes in a torch file give an error or a value, never a crash") {
    const std::vector<uint8_t> file = test::torch_file_i64({1, 2, 3});
    for (size_t i = 0; i < file.size(); ++i) {
        for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}}) {
            std::vector<uint8_t> bad = file;
            bad[i] = v;
            const status s = code_of([&] { read_torch_vector(bad, "bad.pt"); });
            INFO("byte " << i << " = " << int(v));
            CHECK((s == status::ok || s == status::format || s == status::unsupported));
        }
    }
}

TEST_CASE("every truncation of the pickle is an error") {
    const std::vector<uint8_t> pkl = test::tensor_pickle("FloatStorage", 2, 0, 2);
    const std::vector<uint8_t> storage(8, 0);
    for (size_t n = 0; n < pkl.size(); ++n) {
        const std::vector<uint8_t> cut(pkl.begin(), pkl.begin() + static_cast<long>(n));
        const auto file = test::make_zip({{"a/data.pkl", cut}, {"a/data/0", storage}});
        INFO("pickle length " << n);
        CHECK(code_of([&] { read_torch_vector(file, "p.pt"); }) == status::format);
    }
}

TEST_CASE("pickles that are not a single tensor are rejected") {
    const std::vector<uint8_t> storage(8, 0);
    const auto with_pickle = [&](std::vector<uint8_t> pkl) {
        return test::make_zip({{"a/data.pkl", std::move(pkl)}, {"a/data/0", storage}});
    };
    // A dict {"x": tensor} (a state dict) is not a bare tensor.
    std::vector<uint8_t> dict = {0x80, 2, '}', 'q', 0, 'X', 1, 0, 0, 0, 'x'};
    std::vector<uint8_t> tensor = test::tensor_pickle("FloatStorage", 2, 0, 2);
    dict.insert(dict.end(), tensor.begin() + 2, tensor.end() - 1);
    dict.push_back('s');
    dict.push_back('.');
    CHECK(message_of([&] { read_torch_vector(with_pickle(dict), "d.pt"); }).find("dict") !=
          std::string::npos);
    // Calls outside the subset (os.system) are refused, never evaluated.
    const std::vector<uint8_t> evil = {0x80, 2,   'c', 'o', 's',  '\n', 's', 'y',
                                       's',  't', 'e', 'm', '\n', 'X',  2,   0,
                                       0,    0,   'l', 's', 0x85, 'R',  '.'};
    CHECK(code_of([&] { read_torch_vector(with_pickle(evil), "e.pt"); }) == status::unsupported);
    // A list that contains itself must not leak or loop.
    const std::vector<uint8_t> cycle = {0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'};
    CHECK(code_of([&] { read_torch_vector(with_pickle(cycle), "c.pt"); }) == status::format);
    CHECK(code_of([&] {
              read_torch_vector(with_pickle({0x80, 2, 0xff}), "o.pt");
          }) == status::unsupported);
    CHECK(code_of([&] {
              read_torch_vector(with_pickle({0x80, 2, 't', '.'}), "m.pt");
          }) == status::format);
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
