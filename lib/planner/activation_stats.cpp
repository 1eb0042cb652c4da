// Activation statistics files: our GGUF layout and PowerInfer's per-layer torch tensors.
#include "planner/activation_stats.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "formats/torch_tensor.hpp"
#include "gguf/gguf.hpp"
#include "platform/files.hpp"
#include "support/error.hpp"

namespace pi::planner {

namespace {

const std::string block_count_key = std::string(activation_stats_arch) + ".block_count";
const std::string tokens_key = std::string(activation_stats_arch) + ".tokens";

std::string tensor_name(size_t layer) {
    return concat("blk.", layer, ".activation_count");
}

void check_counts(const std::vector<float>& counts, status code, const std::string& where) {
    for (size_t i = 0; i < counts.size(); ++i)
        if (!std::isfinite(counts[i]) || counts[i] < 0.0f)
            fail(code, where, ": count of neuron ", i, " is ", counts[i],
                 ", expected a finite value >= 0");
}

// The layer number of "activation_<digits>.pt", or -1 for any other name.
long layer_of(const std::string& name) {
    static constexpr std::string_view head = "activation_", tail = ".pt";
    if (name.size() <= head.size() + tail.size() || !name.starts_with(head) ||
        !name.ends_with(tail))
        return -1;
    const std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
    if (digits.size() > 9) return -1;
    for (char c : digits)
        if (c < '0' || c > '9') return -1;
    return std::stol(digits);
}

} // namespace

activation_stats read_activation_stats(const std::string& path) {
    const auto f = gguf::file::open(path);
    const std::string arch = f->get_string("general.architecture", "");
    if (arch != activation_stats_arch)
        fail(status::format, path, ": general.architecture is '", arch, "', expected '",
             activation_stats_arch, "' (not an activation statistics file)");
    const uint32_t n_layer = f->get_u32(block_count_key);
    if (!f->find(tokens_key)) fail(status::format, path, ": key '", tokens_key, "' is missing");

    activation_stats stats;
    stats.tokens = f->get_u64(tokens_key, 0);
    for (uint32_t l = 0; l < n_layer; ++l) {
        const std::string name = tensor_name(l);
        const std::string where = concat(path, ": tensor '", name, "'");
        const gguf::tensor_info* t = f->find_tensor(name);
        if (!t) fail(status::format, where, " is missing");
        if (t->type != ggml_type::f32 || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 ||
            t->ne[0] > INT32_MAX)
            fail(status::format, where, " must be a 1-D F32 tensor of at most 2^31-1 elements");
        std::vector<float> counts(static_cast<size_t>(t->ne[0]));
        if (!counts.empty()) std::memcpy(counts.data(), t->data, counts.size() * sizeof(float));
        check_counts(counts, status::format, where);
        stats.counts.push_back(std::move(counts));
    }
    return stats;
}

void write_activation_stats(const std::string& path, const activation_stats& stats) {
    gguf::writer w(false);
    w.set_string("general.architecture", activation_stats_arch);
    w.set_u32(block_count_key, static_cast<uint32_t>(stats.counts.size()));
    w.set_u64(tokens_key, stats.tokens);
    for (size_t l = 0; l < stats.counts.size(); ++l) {
        const std::vector<float>& counts = stats.counts[l];
        check_counts(counts, status::invalid_argument, concat(path, ": layer ", l));
        std::vector<uint8_t> data(counts.size() * sizeof(float));
        if (!data.empty()) std::memcpy(data.data(), counts.data(), data.size());
        const int64_t dims[] = {static_cast<int64_t>(counts.size())};
        w.add_tensor(tensor_name(l), ggml_type::f32, dims, std::move(data));
    }
    w.write(path);
}

activation_stats read_powerinfer_activations(const std::string& dir) {
    std::map<long, std::filesystem::path> files;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(platform::utf8_path(dir), ec), end;
         !ec && it != end; it.increment(ec)) {
        const std::string name = platform::utf8_string(it->path().filename());
        const long layer = layer_of(name);
        if (layer < 0) continue;
        const auto [pos, added] = files.emplace(layer, it->path());
        if (!added)
            fail(status::format, dir, ": both ", platform::utf8_string(pos->second.filename()),
                 " and ", name, " claim layer ", layer);
    }
    if (ec) fail(status::io, dir, ": cannot list the folder: ", ec.message());
    if (files.empty()) fail(status::format, dir, ": no activation_<layer>.pt files");

    activation_stats stats;
    long expected = 0;
    for (const auto& [layer, file] : files) {
        if (layer != expected)
            fail(status::format, dir, ": activation_", expected, ".pt is missing (found layer ",
                 layer, ")");
        ++expected;
        std::vector<float> counts = formats::read_torch_vector(platform::utf8_string(file));
        check_counts(counts, status::format, platform::utf8_string(file));
        stats.counts.push_back(std::move(counts));
    }
    return stats;
}

activation_stats load_activation_stats(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(platform::utf8_path(path), ec))
        return read_powerinfer_activations(path);
    return read_activation_stats(path);
}

} // namespace pi::planner
