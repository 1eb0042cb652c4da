// GPU index files: our round trip, PowerInfer-written files, stale caches and malformed input.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "planner/gpu_index.hpp"
#include "support/error.hpp"
#include "support/log.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using planner::gpu_index;
using hot_sets = std::vector<std::vector<int32_t>>;

std::string in_dir(const std::string& dir, const std::string& name) {
    return (std::filesystem::path(dir) / name).string();
}

std::vector<uint8_t> i32_bytes(const std::vector<int32_t>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

// Collects log lines while alive; restores the default sink afterwards.
struct log_capture {
    log_capture() {
        set_log_sink(
            [](log_level, const char* message, void* self) {
                static_cast<log_capture*>(self)->text += std::string(message) + "\n";
            },
            this);
    }
    ~log_capture() { set_log_sink(nullptr, nullptr); }
    std::string text;
};

// A file laid out as PowerInfer's export_split.py writes it: gguf-py with general.architecture
// first, tensors blk.l.gpu_idx then blk.l.gpu_bucket for each layer, then block_count and
// split.vram_capacity, magic rewritten to PWRI, version 3. `edit` may change it.
struct powerinfer_layout {
    std::string arch = "generic.gpu_index";
    uint64_t capacity = 1000;
    std::vector<std::vector<int32_t>> idx;
    std::vector<std::vector<int32_t>> bucket;
};

std::string write_powerinfer(const std::string& path, const powerinfer_layout& f) {
    gguf::writer w(true);
    w.set_string("general.architecture", f.arch);
    for (size_t l = 0; l < f.idx.size(); ++l) {
        const int64_t a[] = {static_cast<int64_t>(f.idx[l].size())};
        w.add_tensor("blk." + std::to_string(l) + ".gpu_idx", ggml_type::i32, a,
                     i32_bytes(f.idx[l]));
        if (l < f.bucket.size()) {
            const int64_t b[] = {static_cast<int64_t>(f.bucket[l].size())};
            w.add_tensor("blk." + std::to_string(l) + ".gpu_bucket", ggml_type::i32, b,
                         i32_bytes(f.bucket[l]));
        }
    }
    w.set_u32(f.arch + ".block_count", static_cast<uint32_t>(f.idx.size()));
    w.set_u64("split.vram_capacity", f.capacity);
    w.write(path);
    return path;
}

powerinfer_layout two_layers() {
    powerinfer_layout f;
    f.idx = {{1, 0, 1, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}};
    f.bucket = {{0, 2, 3}, {}};
    return f;
}

} // namespace

TEST_CASE("the GPU index path sits next to the model") {
    CHECK(planner::gpu_index_path("/m/x.q4.powerinfer.gguf") ==
          "/m/x.q4.powerinfer.gguf.generated.gpuidx");
}

TEST_CASE("our GPU index round trips and is used for the same model and budget") {
    const std::string dir = test::scratch_dir("gpuidx_round_trip");
    gpu_index index;
    index.hot = {{0, 5, 31}, {}, {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                  16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}};
    index.n_ff = {32, 32, 32};
    index.vram_capacity = 4096;
    index.fingerprint = "1234-00000000deadbeef";
    index.budget = uint64_t{8} << 30;
    const std::string path = in_dir(dir, "m.gguf.generated.gpuidx");
    planner::write_gpu_index(path, index);

    const gpu_index back = planner::read_gpu_index(path);
    CHECK(back.hot == index.hot);
    CHECK(back.n_ff == index.n_ff);
    CHECK(back.vram_capacity == 4096);
    CHECK(back.fingerprint == index.fingerprint);
    CHECK(back.budget == index.budget);

    // The file is what PowerInfer expects: PWRI, generic.gpu_index, I32 tensors in order.
    const auto f = gguf::file::open(path);
    CHECK(f->sparse());
    CHECK(f->version() == 3);
    CHECK(f->get_string("general.architecture") == "generic.gpu_index");
    CHECK(f->get_u32("generic.gpu_index.block_count") == 3);
    REQUIRE(f->tensors().size() == 6);
    CHECK(f->tensors()[0].name == "blk.0.gpu_idx");
    CHECK(f->tensors()[1].name == "blk.0.gpu_bucket");
    CHECK(static_cast<uint32_t>(f->tensors()[0].type) == 18);
    const std::vector<uint8_t> raw = read_all(path);
    CHECK(std::string(raw.begin(), raw.begin() + 4) == "PWRI");

    const auto hot = planner::load_gpu_index(path, index.fingerprint, 3, 32, *index.budget);
    REQUIRE(hot.has_value());
    CHECK(*hot == index.hot);
}

TEST_CASE("a stale GPU index is not used and the log says why") {
    const std::string dir = test::scratch_dir("gpuidx_stale");
    gpu_index index;
    index.hot = {{1, 2}, {}};
    index.n_ff = {16, 16};
    index.fingerprint = "100-0123456789abcdef";
    index.budget = 5000;
    const std::string path = in_dir(dir, "m.gpuidx");
    planner::write_gpu_index(path, index);

    const auto refused = [&](const std::string& fp, int32_t n_layer, int32_t n_ff, uint64_t budget,
                             const char* why) {
        log_capture log;
        const bool none = !planner::load_gpu_index(path, fp, n_layer, n_ff, budget).has_value();
        CHECK_MESSAGE(log.text.find(why) != std::string::npos, log.text);
        return none;
    };
    CHECK(refused("100-ffffffffffffffff", 2, 16, 5000, "another model"));
    CHECK(refused(index.fingerprint, 2, 16, 6000, "budget of 5000"));
    CHECK(refused(index.fingerprint, 3, 16, 5000, "layers"));
    CHECK(refused(index.fingerprint, 2, 17, 5000, "neurons"));
    CHECK_FALSE(refused(index.fingerprint, 2, 16, 5000, "using GPU index"));
    std::filesystem::remove(path);
    CHECK(refused(index.fingerprint, 2, 16, 5000, "no such file"));
}

TEST_CASE("a PowerInfer-written GPU index is accepted when it fits the budget") {
    const std::string dir = test::scratch_dir("gpuidx_powerinfer");
    const std::string path = write_powerinfer(in_dir(dir, "p.gpuidx"), two_layers());
    const gpu_index read = planner::read_gpu_index(path);
    CHECK(read.fingerprint.empty());
    CHECK_FALSE(read.budget.has_value());
    CHECK(read.vram_capacity == 1000);
    CHECK(read.hot == hot_sets{{0, 2, 3}, {}});

    const auto hot = planner::load_gpu_index(path, "any", 2, 8, 1000);
    REQUIRE(hot.has_value());
    CHECK(*hot == hot_sets{{0, 2, 3}, {}});
    log_capture log;
    CHECK_FALSE(planner::load_gpu_index(path, "any", 2, 8, 999).has_value());
    CHECK(log.text.find("exceeds the budget") != std::string::npos);
}

TEST_CASE("malformed GPU index files are rejected without a crash") {
    const std::string dir = test::scratch_dir("gpuidx_malformed");
    int n = 0;
    const auto rejected = [&](const std::function<void(powerinfer_layout&)>& edit) {
        powerinfer_layout f = two_layers();
        edit(f);
        const std::string path = write_powerinfer(in_dir(dir, std::to_string(n++) + ".gpuidx"), f);
        bool format = false;
        try {
            planner::read_gpu_index(path);
        } catch (const error& e) {
            format = e.code() == status::format;
        }
        log_capture log;
        const bool none = !planner::load_gpu_index(path, "", 2, 8, 1 << 20).has_value();
        return format && none && log.text.find("ignored") != std::string::npos;
    };
    CHECK(rejected([](powerinfer_layout& f) { f.arch = "llama"; }));
    CHECK(rejected([](powerinfer_layout& f) { f.bucket.pop_back(); }));      // 3 tensors
    CHECK(rejected([](powerinfer_layout& f) { f.idx[0][1] = 2; }));          // not 0/1
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[0] = {0, 2}; }));     // count
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[0] = {2, 0, 3}; }));  // order
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[0] = {0, 2, 8}; }));  // range
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[0] = {0, 1, 3}; }));  // not marked
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[0] = {0, 2, 2}; }));  // duplicate
    CHECK(rejected([](powerinfer_layout& f) { f.bucket[1] = {-1, 2, 3}; })); // negative

    // Wrong tensor type, missing capacity, fingerprint without budget.
    const std::string f32 = in_dir(dir, "f32.gpuidx");
    {
        gguf::writer w(true);
        w.set_string("general.architecture", "generic.gpu_index");
        w.set_u32("generic.gpu_index.block_count", 1);
        w.set_u64("split.vram_capacity", 1);
        const int64_t one[] = {1};
        w.add_tensor("blk.0.gpu_idx", ggml_type::f32, one, std::vector<uint8_t>(4, 0));
        w.add_tensor("blk.0.gpu_bucket", ggml_type::i32, one, std::vector<uint8_t>(4, 0));
        w.write(f32);
    }
    CHECK_THROWS_AS(planner::read_gpu_index(f32), error);
    const std::string no_capacity = in_dir(dir, "no_capacity.gpuidx");
    {
        gguf::writer w(true);
        w.set_string("general.architecture", "generic.gpu_index");
        w.set_u32("generic.gpu_index.block_count", 0);
        w.write(no_capacity);
    }
    CHECK_THROWS_AS(planner::read_gpu_index(no_capacity), error);
    const std::string half_key = in_dir(dir, "half_key.gpuidx");
    {
        gguf::writer w(true);
        w.set_string("general.architecture", "generic.gpu_index");
        w.set_u32("generic.gpu_index.block_count", 0);
        w.set_u64("split.vram_capacity", 1);
        w.set_string(planner::gpu_index_fingerprint_key, "x");
        w.write(half_key);
    }
    CHECK_THROWS_AS(planner::read_gpu_index(half_key), error);
}

TEST_CASE("every truncation of a GPU index file is rejected without a crash") {
    const std::string dir = test::scratch_dir("gpuidx_truncated");
    const std::string good = write_powerinfer(in_dir(dir, "good.gpuidx"), two_layers());
    const std::vector<uint8_t> bytes = read_all(good);
    const std::string cut_path = in_dir(dir, "cut.gpuidx");
    for (size_t n = 0; n < bytes.size(); n += 3) {
        write_all(cut_path, {bytes.begin(), bytes.begin() + static_cast<long>(n)});
        INFO("length " << n);
        CHECK_THROWS_AS(planner::read_gpu_index(cut_path), error);
        log_capture quiet;
        CHECK_FALSE(planner::load_gpu_index(cut_path, "", 2, 8, 1 << 20).has_value());
    }
}

TEST_CASE("writing a GPU index checks the hot sets") {
    const std::string dir = test::scratch_dir("gpuidx_write_checks");
    gpu_index index;
    index.hot = {{3, 1}};
    index.n_ff = {8};
    CHECK_THROWS_AS(planner::write_gpu_index(in_dir(dir, "a"), index), error);
    index.hot = {{8}};
    CHECK_THROWS_AS(planner::write_gpu_index(in_dir(dir, "b"), index), error);
    index.hot = {{1}};
    index.fingerprint = "x"; // without a budget
    CHECK_THROWS_AS(planner::write_gpu_index(in_dir(dir, "c"), index), error);
    index.hot = {{1}, {2}};
    index.fingerprint.clear();
    CHECK_THROWS_AS(planner::write_gpu_index(in_dir(dir, "d"), index), error);
}

TEST_CASE("the model fingerprint covers the header and the file size, not the weights") {
    const std::string dir = test::scratch_dir("gpuidx_fingerprint");
    const auto model = [&](const std::string& name, const std::string& arch, uint8_t fill) {
        gguf::writer w(true);
        w.set_string("general.architecture", arch);
        const int64_t dims[] = {64};
        w.add_tensor("t", ggml_type::f32, dims, std::vector<uint8_t>(256, fill));
        const std::string path = in_dir(dir, name);
        w.write(path);
        return path;
    };
    const std::string a = model("a.gguf", "llama", 0);
    const std::string b = model("b.gguf", "llama", 7);  // other weights, same header
    const std::string c = model("c.gguf", "bamboo", 0); // other metadata
    const auto fa = gguf::file::open(a), fb = gguf::file::open(b), fc = gguf::file::open(c);
    const std::string pa = planner::model_fingerprint(*fa);
    CHECK(pa == planner::model_fingerprint(*fb));
    CHECK(pa != planner::model_fingerprint(*fc));

    // "<size>-<16 hex digits>" with FNV-1a 64 over the bytes before the data section.
    const std::vector<uint8_t> bytes = read_all(a);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < fa->data_offset(); ++i)
        h = (h ^ bytes[i]) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    CHECK(pa == std::to_string(bytes.size()) + "-" + hex);
}
