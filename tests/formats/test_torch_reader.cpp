// The torch.save readers of lib/formats against hand-built files (torch_fixture.hpp): 1-D tensors
// as the planner reads them, state dicts as the converter reads them, and every crafted, cut or
// corrupt file refused with an error rather than misread.
#include <cstring>
#include <functional>
#include <string>

#include <doctest/doctest.h>

#include "formats/torch_checkpoint.hpp"
#include "formats/torch_fixture.hpp"
#include "formats/torch_tensor.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using formats::read_torch_checkpoint;
using formats::read_torch_vector;
using test::code_of;
using test::message_of;

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// A state dict of "a" (F16 [3, 4] in storage 0) and "b" (F32 [5] in storage 1).
std::vector<test::fixture_tensor> two_tensors() {
    return {{"a", "HalfStorage", "0", 12, 0, {3, 4}, {4, 1}},
            {"b", "FloatStorage", "1", 5, 0, {5}, {1}}};
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> two_storages() {
    std::vector<uint8_t> half(24);
    for (size_t i = 0; i < half.size(); ++i)
        half[i] = static_cast<uint8_t>(i);
    return {{"0", half}, {"1", f32_bytes({1, 2, 3, 4, 5})}};
}

std::vector<uint8_t> checkpoint_with(const std::vector<uint8_t>& pickle,
                                     const test::torch_file_options& o = {}) {
    return test::torch_zip(pickle, two_storages(), o);
}

std::vector<uint8_t> two_tensor_checkpoint() {
    return checkpoint_with(test::state_dict_pickle(two_tensors()));
}

} // namespace

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

TEST_CASE("a vector of more elements than its storage holds is refused before it is allocated") {
    // Stride 0 repeats one stored float 2^40 times: 4 TiB from a file of a few hundred bytes.
    test::torch_file_options expanded;
    expanded.stride = 0;
    const auto file =
        test::torch_file("FloatStorage", f32_bytes({1, 2}), 2, 0, int64_t{1} << 40, expanded);
    CHECK(code_of([&] { read_torch_vector(file, "expanded.pt"); }) == status::format);
    CHECK(contains(message_of([&] { read_torch_vector(file, "expanded.pt"); }),
                   "expanded.pt: the tensor repeats its 1 stored elements as 1099511627776"));
    // A stride of 2 reads every other element.
    test::torch_file_options strided;
    strided.stride = 2;
    CHECK(read_torch_vector(
              test::torch_file("FloatStorage", f32_bytes({1, 2, 3, 4}), 4, 0, 2, strided),
              "strided.pt") == std::vector<float>{1, 3});
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

TEST_CASE("a state dict's tensors are described with their place in the file, not read") {
    const std::vector<uint8_t> file = two_tensor_checkpoint();
    const auto tensors = read_torch_checkpoint(file, "m.bin");
    REQUIRE(tensors.size() == 2);
    CHECK(tensors[0].name == "a");
    CHECK(tensors[0].data.dtype->name == "F16");
    CHECK(tensors[0].data.shape == std::vector<int64_t>{3, 4});
    CHECK(tensors[0].data.contiguous);
    CHECK(tensors[0].data.span == 12);
    CHECK(tensors[0].data.offset % 64 == 0); // torch's padding, kept by the fixture
    const auto storages = two_storages();
    CHECK(std::equal(storages[0].second.begin(), storages[0].second.end(),
                     file.begin() + static_cast<long>(tensors[0].data.offset)));
    CHECK(tensors[1].name == "b");
    CHECK(tensors[1].data.dtype->name == "F32");
    CHECK(std::equal(storages[1].second.begin(), storages[1].second.end(),
                     file.begin() + static_cast<long>(tensors[1].data.offset)));
}

TEST_CASE("a view into part of a storage keeps its offset, strides and span") {
    // "t" is the transpose of a [2, 3] matrix, "row" its second row.
    const std::vector<test::fixture_tensor> views = {
        {"t", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3}},
        {"row", "FloatStorage", "0", 6, 3, {3}, {1}}};
    const auto file =
        test::torch_zip(test::state_dict_pickle(views), {{"0", f32_bytes({0, 1, 2, 3, 4, 5})}});
    const auto tensors = read_torch_checkpoint(file, "v.bin");
    REQUIRE(tensors.size() == 2);
    CHECK_FALSE(tensors[0].data.contiguous);
    CHECK(tensors[0].data.stride == std::vector<int64_t>{1, 3});
    CHECK(tensors[0].data.span == 6);
    CHECK(tensors[1].data.contiguous);
    CHECK(tensors[1].data.offset == tensors[0].data.offset + 12);
    CHECK(tensors[1].data.span == 3);
}

TEST_CASE("nn.Parameter wrappers and the state dict's _metadata are read") {
    const auto file = checkpoint_with(test::state_dict_pickle(two_tensors(), true, true));
    const auto tensors = read_torch_checkpoint(file, "p.bin");
    REQUIRE(tensors.size() == 2);
    CHECK(tensors[1].data.shape == std::vector<int64_t>{5});
}

TEST_CASE("a global outside the allowlist is refused where the pickle names it") {
    test::pickle_writer named;
    named.proto().global("os", "system").op("0}.");
    std::string msg =
        message_of([&] { read_torch_checkpoint(checkpoint_with(named.bytes()), "e.bin"); });
    CHECK(contains(msg, "e.bin: data.pkl: pickle global os.system is not allowed"));
    CHECK(contains(msg, "nothing was executed"));
    test::pickle_writer stacked;
    stacked.proto().str("builtins").str("eval").op("\x93").op("0}.");
    CHECK(code_of([&] { read_torch_checkpoint(checkpoint_with(stacked.bytes()), "s.bin"); }) ==
          status::unsupported);
    test::pickle_writer complex_storage;
    complex_storage.proto().global("torch", "ComplexFloatStorage").op("0}.");
    CHECK(contains(message_of([&] {
                       read_torch_checkpoint(checkpoint_with(complex_storage.bytes()), "c.bin");
                   }),
                   "torch.ComplexFloatStorage is not allowed"));
}

TEST_CASE("BUILD cannot change a storage class, a storage or a tensor") {
    // What would retype every later HalfStorage, then what would resize a storage or a tensor.
    test::pickle_writer storage_class;
    storage_class.proto()
        .global("torch", "HalfStorage")
        .op("}")
        .str("dtype")
        .str("BF16")
        .op("sb0}.");
    test::pickle_writer storage;
    storage.proto().op("(").str("storage").global("torch", "FloatStorage").str("0").str("cpu");
    storage.integer(4).op("tQ}").str("numel").integer(1 << 30).op("sb0}.");
    test::pickle_writer tensor;
    tensor.proto().global("torch._utils", "_rebuild_tensor_v2").op("((").str("storage");
    tensor.global("torch", "FloatStorage").str("0").str("cpu").integer(4).op("tQ").integer(0);
    tensor.int_tuple({2, 2}).int_tuple({2, 1}).op("tR}").str("shape").int_tuple({1 << 20, 1 << 20});
    tensor.op("sb0}.");
    for (const auto& p : {storage_class.bytes(), storage.bytes(), tensor.bytes()}) {
        const std::string msg =
            message_of([&] { read_torch_checkpoint(checkpoint_with(p), "b.bin"); });
        CHECK(contains(msg, "b.bin: data.pkl: cannot read the pickle: "));
        CHECK(contains(msg, "(BUILD); refused"));
    }
}

TEST_CASE("data.pkl must be stored, within the size cap, and match its CRC-32") {
    test::torch_file_options compressed;
    compressed.pickle_method = 8;
    const std::string msg = message_of([&] {
        read_torch_checkpoint(checkpoint_with(test::state_dict_pickle(two_tensors()), compressed),
                              "z.bin");
    });
    CHECK(contains(msg, "z.bin: archive/data.pkl: is compressed"));

    const std::vector<uint8_t> file = two_tensor_checkpoint();
    CHECK(contains(message_of([&] { read_torch_checkpoint(file, "big.bin", 64); }),
                   "big.bin: archive/data.pkl: has "));
    CHECK(contains(message_of([&] { read_torch_checkpoint(file, "big.bin", 64); }),
                   "more than the 64 allowed"));

    std::vector<uint8_t> corrupt = file;
    const std::string needle = "OrderedDict";
    const auto at = std::search(corrupt.begin(), corrupt.end(), needle.begin(), needle.end());
    REQUIRE(at != corrupt.end());
    *at = 'o';
    CHECK(contains(message_of([&] { read_torch_checkpoint(corrupt, "crc.bin"); }),
                   "crc.bin: archive/data.pkl: corrupt zip archive (bad CRC-32"));
}

TEST_CASE("sizes, strides and offsets are checked against the storage") {
    const auto refused = [](const test::fixture_tensor& t, const std::string& part) {
        const auto file =
            test::torch_zip(test::state_dict_pickle({t}), {{"0", f32_bytes({0, 1, 2, 3, 4, 5})}});
        const std::string msg = message_of([&] { read_torch_checkpoint(file, "s.bin"); });
        INFO(msg);
        CHECK(contains(msg, "s.bin: w: " + part));
    };
    refused({"w", "FloatStorage", "0", 7, 0, {6}, {1}}, "storage 0 has 24 bytes, expected 7 x 4");
    refused({"w", "FloatStorage", "1", 6, 0, {6}, {1}}, "storage 1 is missing from the archive");
    refused({"w", "FloatStorage", "0", 6, 0, {-1}, {1}}, "invalid size [-1] or stride [1]");
    refused({"w", "FloatStorage", "0", 6, 0, {2, 3}, {3}}, "invalid size [2, 3] or stride [3]");
    refused({"w", "FloatStorage", "0", 6, 2, {2, 3}, {3, 1}},
            "reaches element 7 of a storage of 6");
    refused({"w", "FloatStorage", "0", 6, 7, {0}, {1}}, "reaches element 6 of a storage of 6");
    refused({"w", "FloatStorage", "0", 6, 0, {int64_t{1} << 40, int64_t{1} << 40}, {0, 0}},
            "has more than 2^63 elements");
    refused({"w", "FloatStorage", "0", 6, 0, {int64_t{1} << 40, 2}, {int64_t{1} << 40, 1}},
            "reaches element");
    // A stride of 0 (an expanded tensor) stays inside its storage.
    const auto expanded =
        test::torch_zip(test::state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {4, 6}, {0, 1}}}),
                        {{"0", f32_bytes({0, 1, 2, 3, 4, 5})}});
    CHECK(read_torch_checkpoint(expanded, "x.bin")[0].data.span == 6);
}

TEST_CASE("sizes that are not integers are refused, naming the tensor") {
    // The string "32", the float 32.0 and True.
    const std::string as_string{'X', 2, 0, 0, 0, '3', '2'};
    const std::string as_float{'G', 0x40, 0x40, 0, 0, 0, 0, 0, 0};
    for (const std::string& value : {as_string, as_float, std::string("\x88")}) {
        test::pickle_writer p;
        p.proto().global("collections", "OrderedDict").op(")R(").str("w");
        p.global("torch._utils", "_rebuild_tensor_v2").op("((").str("storage");
        p.global("torch", "FloatStorage").str("0").str("cpu").integer(6).op("tQ").integer(0);
        p.op("(").op(value).op("t").int_tuple({1}).op("\x89").global("collections", "OrderedDict");
        p.op(")RtRu.");
        const auto file = test::torch_zip(p.bytes(), {{"0", f32_bytes({0, 1, 2, 3, 4, 5})}});
        CHECK(contains(message_of([&] { read_torch_checkpoint(file, "i.bin"); }),
                       "i.bin: w: storage offset, size and stride must be integers"));
    }
}

TEST_CASE("a storage whose data lies past the end of the file names its tensor") {
    std::vector<uint8_t> file = two_tensor_checkpoint();
    const std::string name = "archive/data/1";
    const auto at = std::search(file.begin(), file.end(), name.begin(), name.end());
    REQUIRE(at != file.end());
    const auto header = static_cast<size_t>(at - file.begin()) - 30;
    file[header + 28] = 0xff; // a local extra field of 64 KiB
    file[header + 29] = 0xff;
    CHECK(contains(message_of([&] { read_torch_checkpoint(file, "cut.bin"); }),
                   "cut.bin: b: storage 1 runs past the end of the file (truncated file?)"));
}

TEST_CASE("files that are not state dicts of tensors are refused") {
    const std::vector<uint8_t> legacy = {0x80, 2, 'N', '.'};
    CHECK(contains(message_of([&] { read_torch_checkpoint(legacy, "old.pt"); }),
                   "old.pt: not a zip-format torch.save file"));
    const auto no_pickle = test::make_zip({{"archive/data/0", {1, 2, 3, 4}}});
    CHECK(contains(message_of([&] { read_torch_checkpoint(no_pickle, "n.pt"); }),
                   "has no single <archive>/data.pkl"));
    const std::vector<uint8_t> bare = test::tensor_pickle("FloatStorage", 5, 0, 5, "1");
    CHECK(contains(message_of([&] { read_torch_checkpoint(checkpoint_with(bare), "t.pt"); }),
                   "t.pt: data.pkl: holds a tensor, not a state dict of tensors"));
    test::pickle_writer number;
    number.proto().op("}").integer(3).integer(4).op("s.");
    CHECK(contains(
        message_of([&] { read_torch_checkpoint(checkpoint_with(number.bytes()), "k.pt"); }),
        "k.pt: data.pkl: a state dict key is a int, not a string"));
    test::pickle_writer value;
    value.proto().op("}").str("w").integer(4).op("s.");
    CHECK(
        contains(message_of([&] { read_torch_checkpoint(checkpoint_with(value.bytes()), "v.pt"); }),
                 "v.pt: w: holds a int, not a tensor"));
}

TEST_CASE("a pickle cannot make the reader do unbounded work") {
    // Two bytes per push of the same memoized None: 8 Mi pushes from 16 MiB of pickle.
    test::pickle_writer p;
    p.proto().op("N").binput(0);
    std::string gets;
    for (int i = 0; i <= (1 << 23); ++i)
        gets += std::string{'h', 0};
    p.op(gets).op(".");
    const std::string msg =
        message_of([&] { read_torch_checkpoint(checkpoint_with(p.bytes()), "w.pt"); });
    CHECK(contains(msg, "values: not a torch.save file of tensors"));
}

TEST_CASE("every truncation or corrupt byte of a checkpoint is an error, never a crash") {
    const std::vector<uint8_t> file = two_tensor_checkpoint();
    for (size_t n = 0; n < file.size(); ++n) {
        const std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<long>(n));
        const status s = code_of([&] { read_torch_checkpoint(cut, "cut.bin"); });
        INFO("length " << n);
        CHECK((s == status::format || s == status::unsupported));
    }
    for (size_t i = 0; i < file.size(); ++i) {
        for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}}) {
            std::vector<uint8_t> bad = file;
            bad[i] = v;
            const status s = code_of([&] { read_torch_checkpoint(bad, "bad.bin"); });
            INFO("byte " << i << " = " << int(v));
            CHECK((s == status::ok || s == status::format || s == status::unsupported));
        }
    }
}

TEST_CASE("a file that cannot be opened is an I/O error naming it") {
    const std::string msg = message_of([] { read_torch_vector("/nonexistent/activation_0.pt"); });
    CHECK(contains(msg, "/nonexistent/activation_0.pt: cannot open"));
    CHECK(code_of([] { read_torch_vector("/nonexistent/activation_0.pt"); }) == status::io);
}
