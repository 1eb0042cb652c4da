// GPU index files as PowerInfer's export_split.py writes them (gguf-py output with the magic
// rewritten to PWRI), read by tensor position like llama_gpu_split_loader does.
#include "planner/gpu_index.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "gguf/gguf.hpp"
#include "platform/files.hpp"
#include "support/error.hpp"
#include "support/fnv1a.hpp"
#include "support/log.hpp"

namespace pi::planner {

namespace {

constexpr const char* arch = "generic.gpu_index";
constexpr const char* block_count_key = "generic.gpu_index.block_count";
constexpr const char* capacity_key = "split.vram_capacity";

std::vector<int32_t> i32_values(const gguf::tensor_info& t, const std::string& where) {
    if (t.type != ggml_type::i32 || t.ne[1] != 1 || t.ne[2] != 1 || t.ne[3] != 1 ||
        t.ne[0] > INT32_MAX)
        fail(status::format, where, " must be a 1-D I32 tensor of at most 2^31-1 elements");
    std::vector<int32_t> v(static_cast<size_t>(t.ne[0]));
    if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(int32_t));
    return v;
}

// The hot set of one layer from its gpu_idx and gpu_bucket tensors.
std::vector<int32_t> layer_hot(const gguf::tensor_info& idx_t, const gguf::tensor_info& bucket_t,
                               const std::string& path) {
    const std::string idx_where = concat(path, ": tensor '", idx_t.name, "'");
    const std::string bucket_where = concat(path, ": tensor '", bucket_t.name, "'");
    const std::vector<int32_t> idx = i32_values(idx_t, idx_where);
    std::vector<int32_t> bucket = i32_values(bucket_t, bucket_where);
    size_t count = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
        if (idx[i] != 0 && idx[i] != 1)
            fail(status::format, idx_where, ": element ", i, " is ", idx[i], ", expected 0 or 1");
        count += static_cast<size_t>(idx[i]);
    }
    if (bucket.size() != count)
        fail(status::format, bucket_where, " has ", bucket.size(), " ids but gpu_idx marks ", count,
             " neurons");
    for (size_t k = 0; k < bucket.size(); ++k) {
        const int32_t id = bucket[k];
        if (id < 0 || static_cast<size_t>(id) >= idx.size())
            fail(status::format, bucket_where, ": id ", id, " is outside 0..", idx.size() - 1);
        if (k > 0 && id <= bucket[k - 1])
            fail(status::format, bucket_where, ": ids are not strictly ascending at position ", k);
        if (idx[static_cast<size_t>(id)] != 1)
            fail(status::format, bucket_where, ": id ", id, " is not marked in gpu_idx");
    }
    return bucket;
}

std::vector<uint8_t> i32_bytes(const std::vector<int32_t>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(int32_t));
    if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

} // namespace

std::string gpu_index_path(const std::string& model_path) {
    return model_path + ".generated.gpuidx";
}

std::string model_fingerprint(const gguf::file& model) {
    const std::span<const uint8_t> bytes = model.bytes();
    const size_t header =
        static_cast<size_t>(std::min<uint64_t>(model.data_offset(), bytes.size()));
    const uint64_t hash = fnv1a(bytes.first(header));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    return concat(bytes.size(), "-", hex);
}

gpu_index read_gpu_index(const std::string& path) {
    const auto f = gguf::file::open(path);
    const std::string file_arch = f->get_string("general.architecture", "");
    if (file_arch != arch)
        fail(status::format, path, ": general.architecture is '", file_arch, "', expected '", arch,
             "' (not a GPU index file)");
    const uint32_t n_layer = f->get_u32(block_count_key);
    if (!f->find(capacity_key)) fail(status::format, path, ": key '", capacity_key, "' is missing");
    if (f->tensors().size() != uint64_t{2} * n_layer)
        fail(status::format, path, ": has ", f->tensors().size(), " tensors, ", block_count_key,
             " = ", n_layer, " needs ", uint64_t{2} * n_layer);

    gpu_index index;
    index.vram_capacity = f->get_u64(capacity_key, 0);
    const bool has_fingerprint = f->find(gpu_index_fingerprint_key) != nullptr;
    const bool has_budget = f->find(gpu_index_budget_key) != nullptr;
    if (has_fingerprint != has_budget)
        fail(status::format, path, ": keys '", gpu_index_fingerprint_key, "' and '",
             gpu_index_budget_key, "' must appear together");
    if (has_fingerprint) {
        index.fingerprint = f->get_string(gpu_index_fingerprint_key);
        index.budget = f->get_u64(gpu_index_budget_key, 0);
    }
    index.hot.reserve(n_layer);
    index.n_ff.reserve(n_layer);
    for (size_t l = 0; l < n_layer; ++l) {
        const gguf::tensor_info& idx = f->tensors()[2 * l];
        index.hot.push_back(layer_hot(idx, f->tensors()[2 * l + 1], path));
        index.n_ff.push_back(static_cast<int32_t>(idx.ne[0]));
    }
    return index;
}

void write_gpu_index(const std::string& path, const gpu_index& index) {
    if (index.hot.size() != index.n_ff.size())
        fail(status::invalid_argument, path, ": GPU index has ", index.hot.size(), " hot sets for ",
             index.n_ff.size(), " layers");
    if (index.fingerprint.empty() == index.budget.has_value())
        fail(status::invalid_argument, path,
             ": a GPU index needs both a fingerprint and a budget, or neither");
    gguf::writer w(true);
    w.set_string("general.architecture", arch);
    w.set_u32(block_count_key, static_cast<uint32_t>(index.hot.size()));
    w.set_u64(capacity_key, index.vram_capacity);
    if (index.budget) {
        w.set_string(gpu_index_fingerprint_key, index.fingerprint);
        w.set_u64(gpu_index_budget_key, *index.budget);
    }
    for (size_t l = 0; l < index.hot.size(); ++l) {
        const std::vector<int32_t>& hot = index.hot[l];
        const int32_t n_ff = index.n_ff[l];
        if (n_ff < 0) fail(status::invalid_argument, path, ": layer ", l, ": n_ff is negative");
        std::vector<int32_t> idx(static_cast<size_t>(n_ff), 0);
        for (size_t k = 0; k < hot.size(); ++k) {
            if (hot[k] < 0 || hot[k] >= n_ff || (k > 0 && hot[k] <= hot[k - 1]))
                fail(status::invalid_argument, path, ": layer ", l, ": hot id ", hot[k],
                     " at position ", k, " is out of 0..", n_ff - 1, " or not ascending");
            idx[static_cast<size_t>(hot[k])] = 1;
        }
        const int64_t idx_dims[] = {n_ff};
        const int64_t bucket_dims[] = {static_cast<int64_t>(hot.size())};
        w.add_tensor(concat("blk.", l, ".gpu_idx"), ggml_type::i32, idx_dims, i32_bytes(idx));
        w.add_tensor(concat("blk.", l, ".gpu_bucket"), ggml_type::i32, bucket_dims, i32_bytes(hot));
    }
    w.write(path);
}

std::optional<std::vector<std::vector<int32_t>>> load_gpu_index(const std::string& path,
                                                                const std::string& fingerprint,
                                                                int32_t n_layer, int32_t n_ff,
                                                                uint64_t budget) {
    const auto reject = [&](const std::string& why) {
        log(log_level::info, concat("GPU index ", path, " not used: ", why));
        return std::nullopt;
    };
    std::error_code ec;
    if (!std::filesystem::exists(platform::utf8_path(path), ec)) return reject("no such file");
    gpu_index index;
    try {
        index = read_gpu_index(path);
    } catch (const error& e) {
        log(log_level::warn, concat("GPU index ignored: ", e.what()));
        return std::nullopt;
    }
    if (index.hot.size() != static_cast<size_t>(n_layer))
        return reject(concat("it has ", index.hot.size(), " layers, the model ", n_layer));
    for (size_t l = 0; l < index.n_ff.size(); ++l)
        if (index.n_ff[l] != n_ff)
            return reject(
                concat("layer ", l, " has ", index.n_ff[l], " neurons, the model ", n_ff));
    if (index.budget) {
        if (index.fingerprint != fingerprint)
            return reject(concat("it was built for another model file (fingerprint ",
                                 index.fingerprint, ", this model ", fingerprint, ")"));
        if (*index.budget != budget)
            return reject(concat("it was built for a budget of ", *index.budget,
                                 " bytes, this one is ", budget));
    } else if (index.vram_capacity > budget) {
        return reject(concat("its split.vram_capacity of ", index.vram_capacity,
                             " bytes exceeds the budget of ", budget));
    }
    log(log_level::info, concat("using GPU index ", path));
    return std::move(index.hot);
}

} // namespace pi::planner
