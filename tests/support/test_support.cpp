#include "support/test_support.hpp"

#include <cstdlib>
#include <filesystem>

#include <doctest/doctest.h>

namespace pi::test {

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

std::string vector_data_dir() {
    if (const char* env = std::getenv("PI_TEST_DATA"); env && *env) return env;
    return PI_TEST_DATA_DIR;
}

bool require_vector_file(const std::string& file) {
    const std::filesystem::path p = std::filesystem::path(vector_data_dir()) / file;
    if (std::filesystem::exists(p)) return true;
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") {
        FAIL("tokenizer vectors missing under CI: " << p.string());
    } else {
        MESSAGE("SKIPPED: tokenizer vectors not found: " << p.string());
    }
    return false;
}

std::string fixture_vocab_path() { return PI_TEST_FIXTURE_VOCAB; }

std::string scratch_dir(const std::string& name) {
    const std::filesystem::path p = std::filesystem::path(PI_TEST_BINARY_DIR) / "scratch" / name;
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

} // namespace pi::test

namespace pi::test {

synth_options tiny_model_options(bool sparse) {
    synth_options o;
    o.n_embd = 64;
    o.n_layer = 2;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 176;
    o.n_ctx_train = 256;
    o.sparse = sparse;
    o.seed = 7;
    o.vocab_path = fixture_vocab_path();
    return o;
}

std::string write_tiny_model(const std::string& dir, const std::string& name, const synth_options& o) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    write_synthetic_model(o, path);
    return path;
}

std::string rewrite_model(const std::string& src, const std::string& dst,
                          const std::function<void(model_edit&)>& edit) {
    const auto f = gguf::file::open(src);
    model_edit e;
    e.sparse = f->sparse();
    e.kv = f->metadata();
    for (const gguf::tensor_info& t : f->tensors()) {
        model_edit::tensor copy{t.name, t.type, {}, std::vector<uint8_t>(t.data, t.data + t.n_bytes)};
        for (uint32_t i = 0; i < t.n_dims; ++i) copy.dims.push_back(t.ne[i]);
        e.tensors.push_back(std::move(copy));
    }
    edit(e);
    gguf::writer w(e.sparse);
    for (auto& [key, value] : e.kv)
        if (key != "general.alignment") w.set(key, value);
    for (auto& t : e.tensors) w.add_tensor(t.name, t.type, t.dims, std::move(t.data));
    w.write(dst);
    return dst;
}

} // namespace pi::test
