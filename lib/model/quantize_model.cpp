// Model quantization: plan every tensor first (so that a bad input fails before any work; the
// plan is PowerInfer's quantize's, get_k_quant_type's mix included), then stream the output: the
// header goes out first (every size follows from type and shape), then each tensor, converted
// row-parallel in a task arena of n_threads a chunk at a time. Memory stays at one chunk whatever
// the model's size.
#include "model/quantize_model.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <limits>
#include <optional>
#include <vector>

#include "gguf/gguf.hpp"
#include "platform/files.hpp"
#include "platform/parallel.hpp"
#include "quant/blocks.hpp"
#include "support/error.hpp"
#include "support/log.hpp"

namespace pi {

namespace {

struct target {
    file_type id;
    const char* name;
    ggml_type type;
};

constexpr std::array<target, 16> targets = {{
    {file_type::all_f32, "F32", ggml_type::f32},
    {file_type::mostly_f16, "F16", ggml_type::f16},
    {file_type::q4_0, "Q4_0", ggml_type::q4_0},
    {file_type::q4_1, "Q4_1", ggml_type::q4_1},
    {file_type::q5_0, "Q5_0", ggml_type::q5_0},
    {file_type::q5_1, "Q5_1", ggml_type::q5_1},
    {file_type::q8_0, "Q8_0", ggml_type::q8_0},
    {file_type::q2_k, "Q2_K", ggml_type::q2_k},
    {file_type::q3_k_s, "Q3_K_S", ggml_type::q3_k},
    {file_type::q3_k_m, "Q3_K_M", ggml_type::q3_k},
    {file_type::q3_k_l, "Q3_K_L", ggml_type::q3_k},
    {file_type::q4_k_s, "Q4_K_S", ggml_type::q4_k},
    {file_type::q4_k_m, "Q4_K_M", ggml_type::q4_k},
    {file_type::q5_k_s, "Q5_K_S", ggml_type::q5_k},
    {file_type::q5_k_m, "Q5_K_M", ggml_type::q5_k},
    {file_type::q6_k, "Q6_K", ggml_type::q6_k},
}};

// PowerInfer's quantize takes the plain K names for the _M variants.
struct alias {
    const char* name;
    file_type id;
};
constexpr std::array<alias, 3> aliases = {{
    {"Q3_K", file_type::q3_k_m},
    {"Q4_K", file_type::q4_k_m},
    {"Q5_K", file_type::q5_k_m},
}};

constexpr int max_threads = 1024;

const target& find_target(file_type id) {
    for (const target& t : targets)
        if (t.id == id) return t;
    fail(status::invalid_argument, "file type ", static_cast<uint32_t>(id),
         " is not a quantization target");
}

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(std::string_view s, std::string_view part) noexcept {
    return s.find(part) != std::string_view::npos;
}

bool is_predictor(std::string_view name) noexcept {
    return ends_with(name, ".fc1.weight") || ends_with(name, ".fc2.weight");
}

bool is_k_quant(ggml_type t) noexcept {
    return t == ggml_type::q2_k || t == ggml_type::q3_k || t == ggml_type::q4_k ||
           t == ggml_type::q5_k || t == ggml_type::q6_k;
}

// The 32-element type a K-quant falls back to on rows that do not split into 256.
ggml_type k_fallback(ggml_type t) noexcept {
    switch (t) {
    case ggml_type::q2_k:
        return ggml_type::q4_0;
    case ggml_type::q3_k:
        return ggml_type::q4_1;
    case ggml_type::q4_k:
        return ggml_type::q5_0;
    case ggml_type::q5_k:
        return ggml_type::q5_1;
    default:
        return ggml_type::q8_0;
    }
}

// PowerInfer's get_k_quant_type (llama.cpp of late 2023 plus the predictor rule): the type of
// each quantized weight, asked in file order, since the attn_v and ffn_down rules depend on the
// layer's position among those tensors. Names are matched as substrings, as there; so
// "ffn_down_t.weight" (PowerInfer's transposed down projection) is not an ffn_down.
class k_quant_mix {
  public:
    k_quant_mix(const gguf::file& f, file_type target) : ftype_(target) {
        const std::string arch = f.get_string("general.architecture", "");
        falcon_ = arch == "falcon";
        const uint32_t n_layer = f.get_u32(arch + ".block_count", 0);
        const uint32_t n_head = f.get_u32(arch + ".attention.head_count", 0);
        const uint32_t n_head_kv = f.get_u32(arch + ".attention.head_count_kv", n_head);
        // llama.cpp's MODEL_70B: 80 Llama layers with grouped-query attention.
        model_70b_ = arch == "llama" && n_layer == 80 && n_head != n_head_kv;
        eight_experts_ = f.get_u32(arch + ".expert_count", 0) == 8;
        for (const gguf::tensor_info& t : f.tensors()) {
            if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight"))
                ++n_attention_wv_;
            else if (contains(t.name, "ffn_down.weight"))
                ++n_ffn_down_;
        }
        // PowerInfer warns here; every sparse file (ffn_down_t, no ffn_down) would, so a note.
        if (n_attention_wv_ != n_ffn_down_ || n_attention_wv_ != static_cast<int>(n_layer))
            log(log_level::info,
                concat(f.path(), ": strange model for the K-quant mix: ", n_attention_wv_,
                       " attn_v/attn_qkv, ", n_ffn_down_, " ffn_down, ", n_layer, " layers"));
    }

    ggml_type type_of(const gguf::tensor_info& t, ggml_type base) {
        using ft = file_type;
        using gt = ggml_type;
        const std::string_view name = t.name;
        gt type = base;
        if (name == "output.weight") {
            if (falcon_ || t.ne[0] % qk_k != 0)
                type = gt::q8_0;
            else if (type != gt::q8_0)
                type = gt::q6_k;
        } else if (contains(name, "attn_v.weight")) {
            const int i = i_attention_wv_++;
            if (is(ft::q2_k))
                type = gt::q3_k;
            else if (is(ft::q3_k_m))
                type = i < 2 ? gt::q5_k : gt::q4_k;
            else if (is(ft::q3_k_l))
                type = gt::q5_k;
            else if ((is(ft::q4_k_m) || is(ft::q5_k_m)) && more_bits(i, n_attention_wv_))
                type = gt::q6_k;
            else if (is(ft::q4_k_s) && i < 4)
                type = gt::q5_k;
            // 8 heads share a 70B model's attn_v, 8x smaller than attn_q: more bits are cheap.
            if (model_70b_ && (type == gt::q3_k || type == gt::q4_k)) type = gt::q5_k;
            if (eight_experts_) type = gt::q8_0;
        } else if (contains(name, "attn_k.weight")) {
            if (eight_experts_) type = gt::q8_0;
        } else if (contains(name, "ffn_down.weight")) {
            const int i = i_ffn_down_++;
            const bool more = more_bits(i, n_ffn_down_);
            if (is(ft::q2_k))
                type = gt::q3_k;
            else if (is(ft::q3_k_m))
                type = i < 2 ? gt::q5_k : !falcon_ || more ? gt::q4_k : gt::q3_k;
            else if (is(ft::q3_k_l))
                type = falcon_ ? gt::q4_k : gt::q5_k;
            else if (is(ft::q4_k_m) && falcon_)
                type = i < 2 ? gt::q6_k : more ? gt::q5_k : gt::q4_k;
            else if (is(ft::q4_k_m) && more)
                type = gt::q6_k;
            else if (is(ft::q5_k_m) && more)
                type = gt::q6_k;
            else if (is(ft::q4_k_s) && !falcon_ && i < 4)
                type = gt::q5_k;
        } else if (contains(name, "attn_output.weight")) {
            if (!falcon_ && is(ft::q2_k))
                type = gt::q3_k;
            else if (!falcon_ && is(ft::q3_k_m))
                type = gt::q4_k;
            else if (is(ft::q3_k_l))
                type = falcon_ ? gt::q4_k : gt::q5_k;
        } else if (contains(name, "attn_qkv.weight")) {
            if (is(ft::q3_k_m) || is(ft::q3_k_l))
                type = gt::q4_k;
            else if (is(ft::q4_k_m))
                type = gt::q5_k;
            else if (is(ft::q5_k_m))
                type = gt::q6_k;
        } else if (contains(name, "ffn_gate.weight") || contains(name, "ffn_up.weight")) {
            if (is(ft::q2_k)) type = gt::q3_k;
        } else if (contains(name, "fc1.weight") || contains(name, "fc2.weight")) {
            type = is(ft::q4_0) ? gt::q4_0 : gt::q5_0;
        }
        if (is_k_quant(type) && t.ne[0] % qk_k != 0) type = k_fallback(type);
        return type;
    }

  private:
    bool is(file_type t) const noexcept { return ftype_ == t; }

    // The first and last eighth of the layers, and every third one between.
    static bool more_bits(int i, int n) noexcept {
        return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    }

    file_type ftype_;
    bool falcon_ = false;
    bool model_70b_ = false;
    bool eight_experts_ = false;
    int n_attention_wv_ = 0;
    int n_ffn_down_ = 0;
    int i_attention_wv_ = 0;
    int i_ffn_down_ = 0;
};

bool is_integer(ggml_type t) noexcept {
    return t == ggml_type::i8 || t == ggml_type::i16 || t == ggml_type::i32;
}

const char* type_name(ggml_type t) noexcept {
    const char* name = traits_of(t).name;
    return name ? name : "?";
}

// Same file, also through a symbolic or hard link: rename() over it would replace the input.
void refuse_same_file(const std::string& in_path, const std::string& out_path) {
    std::error_code ec; // a missing output is not the input
    const bool same_name = in_path == out_path;
    const bool same_file = std::filesystem::equivalent(platform::utf8_path(in_path),
                                                       platform::utf8_path(out_path), ec);
    if (same_name || same_file)
        fail(status::invalid_argument, "refusing to write the output over the input model ",
             in_path, " (", out_path, " is the same file)");
}

class progress_meter {
  public:
    progress_meter(const quantize_options& o, uint64_t total) : o_(o), total_(total) {}

    void advance(uint64_t elements) {
        done_ += elements;
        if (!o_.progress) return;
        const float p =
            total_ == 0 ? 1.0f : static_cast<float>(static_cast<double>(done_) / total_);
        if (!o_.progress(std::min(p, 1.0f), o_.progress_user_data))
            fail(status::cancelled, "quantization cancelled by the progress callback");
    }

  private:
    const quantize_options& o_;
    uint64_t total_;
    uint64_t done_ = 0;
};

// Rows [first, last) of t, converted to `to` into out (which holds those rows of the result).
bool convert_rows(const gguf::tensor_info& t, ggml_type to, int64_t first, int64_t last,
                  uint8_t* out) {
    const int64_t ne0 = t.ne[0];
    const size_t in_row = row_bytes(t.type, ne0);
    const size_t out_row = row_bytes(to, ne0);
    const to_float_fn to_float = traits_of(t.type).to_float;
    std::vector<float> row(static_cast<size_t>(ne0));
    for (int64_t i = first; i != last; ++i) {
        to_float(t.data + i * in_row, row.data(), ne0);
        if (!quantize_row(to, row, std::span<uint8_t>(out + (i - first) * out_row, out_row)))
            return false;
    }
    return true;
}

// Converts row-parallel and streams the result, in chunks of about 4M elements: one chunk is
// all the memory a tensor takes (`scratch`, reused from tensor to tensor, and the chunk's input
// pages), and progress and cancellation stay responsive on the largest tensors.
void convert(const gguf::tensor_info& t, ggml_type to, platform::task_arena& arena,
             progress_meter& meter, std::vector<uint8_t>& scratch, gguf::tensor_stream& out) {
    const int64_t ne0 = t.ne[0];
    const int64_t n = t.n_elements();
    if (n == 0) return;
    const int64_t rows = n / ne0;
    const size_t in_row = row_bytes(t.type, ne0);
    const size_t out_row = row_bytes(to, ne0);
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / ne0);
    for (int64_t first = 0; first < rows; first += chunk) {
        const int64_t last = std::min(rows, first + chunk);
        const size_t n_bytes = static_cast<size_t>(last - first) * out_row;
        if (scratch.size() < n_bytes) scratch.resize(n_bytes);
        std::atomic<bool> ok = true;
        arena.execute([&] {
            platform::parallel_for(first, last, 1, [&](int64_t begin, int64_t end) {
                const size_t at = static_cast<size_t>(begin - first) * out_row;
                if (!convert_rows(t, to, begin, end, scratch.data() + at)) ok.store(false);
            });
        });
        if (!ok.load())
            fail(status::internal, "tensor '", t.name, "': no ", type_name(t.type), " -> ",
                 type_name(to), " conversion");
        out.append(std::span<const uint8_t>(scratch.data(), n_bytes));
        // Input pages written out leave this process (they stay in the page cache): without
        // this the whole input model would count in the quantizer's RSS.
        platform::release_pages(t.data + static_cast<size_t>(first) * in_row,
                                static_cast<size_t>(last - first) * in_row);
        meter.advance(static_cast<uint64_t>((last - first) * ne0));
    }
}

// Copies an unchanged tensor from the input mapping, a chunk at a time.
void copy(const gguf::tensor_info& t, gguf::tensor_stream& out) {
    constexpr uint64_t chunk = uint64_t{16} << 20;
    for (uint64_t at = 0; at < t.n_bytes; at += chunk) {
        const size_t n = static_cast<size_t>(std::min(chunk, t.n_bytes - at));
        out.append(std::span<const uint8_t>(t.data + at, n));
        platform::release_pages(t.data + at, n);
    }
}

} // namespace

file_type parse_quantize_type(std::string_view name) {
    for (const target& t : targets)
        if (iequals(name, t.name)) return t.id;
    for (const alias& a : aliases)
        if (iequals(name, a.name)) return a.id;
    fail(status::invalid_argument, "quantization type '", name,
         "' is not one of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, F32, Q2_K, Q3_K_S, Q3_K_M (Q3_K), "
         "Q3_K_L, Q4_K_S, Q4_K_M (Q4_K), Q5_K_S, Q5_K_M (Q5_K), Q6_K");
}

const char* file_type_name(file_type target) {
    return find_target(target).name;
}

ggml_type base_type(file_type target) {
    return find_target(target).type;
}

std::vector<tensor_plan> plan_tensors(const gguf::file& f, const quantize_options& o) {
    const ggml_type base = base_type(o.target);
    std::optional<k_quant_mix> mix;
    if (!o.pure) mix.emplace(f, o.target);
    std::vector<tensor_plan> plans;
    plans.reserve(f.tensors().size());
    for (const gguf::tensor_info& t : f.tensors()) {
        const bool quantized = t.n_dims == 2 && ends_with(t.name, "weight") &&
                               !is_integer(t.type) && !contains(t.name, "ffn_gate_inp.weight") &&
                               !(o.leave_output && t.name == "output.weight");
        if (!quantized) {
            plans.push_back({t.type, {}});
            continue;
        }
        if (t.type != ggml_type::f32 && t.type != ggml_type::f16)
            fail(status::unsupported, "tensor '", t.name, "' is already ", type_name(t.type),
                 "; requantizing is not supported, start from the F32 or F16 model");
        const ggml_type to = mix ? mix->type_of(t, base) : base;
        if (o.keep_predictor && is_predictor(t.name)) {
            plans.push_back({t.type, {}});
            continue;
        }
        const uint32_t block = traits_of(to).block_size;
        if (t.ne[0] % block != 0) {
            plans.push_back(
                {t.type, concat("tensor '", t.name, "': rows of ", t.ne[0],
                                " elements are not a multiple of the ", type_name(to),
                                " block size ", block, "; kept as ", type_name(t.type))});
            continue;
        }
        plans.push_back({to, {}});
    }
    return plans;
}

void quantize_model(const std::string& in_path, const std::string& out_path,
                    const quantize_options& o) {
    const target& goal = find_target(o.target);
    if (in_path.empty()) fail(status::invalid_argument, "the input path is empty");
    if (out_path.empty()) fail(status::invalid_argument, "the output path is empty");
    if (o.n_threads > max_threads)
        fail(status::invalid_argument, "n_threads ", o.n_threads, " is more than ", max_threads);
    refuse_same_file(in_path, out_path);

    const std::unique_ptr<gguf::file> f = gguf::file::open(in_path);
    if (f->alignment() > std::numeric_limits<uint32_t>::max())
        fail(status::unsupported, in_path, ": alignment ", f->alignment(), " is too large");
    const std::vector<tensor_plan> plans = plan_tensors(*f, o);
    uint64_t total = 0;
    for (const gguf::tensor_info& t : f->tensors())
        total += static_cast<uint64_t>(t.n_elements());

    gguf::writer w(f->sparse(), static_cast<uint32_t>(f->alignment()));
    for (const auto& [key, v] : f->metadata())
        w.set(key, v);
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", static_cast<uint32_t>(goal.id));
    for (size_t i = 0; i < plans.size(); ++i) {
        const gguf::tensor_info& t = f->tensors()[i];
        const std::vector<int64_t> dims(t.ne, t.ne + t.n_dims);
        w.add_tensor_info(t.name, plans[i].type, dims);
    }

    gguf::tensor_stream out(w, out_path);
    platform::task_arena arena(o.n_threads > 0 ? o.n_threads : platform::default_concurrency());
    progress_meter meter(o, total);
    std::vector<uint8_t> scratch;
    size_t n_converted = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
        const gguf::tensor_info& t = f->tensors()[i];
        if (!plans[i].warning.empty())
            log(log_level::warn, concat(in_path, ": ", plans[i].warning));
        if (plans[i].type == t.type) {
            copy(t, out);
            meter.advance(static_cast<uint64_t>(t.n_elements()));
        } else {
            convert(t, plans[i].type, arena, meter, scratch, out);
            ++n_converted;
        }
    }
    // Composed before the commit: once the file is in place, nothing may fail the call.
    const std::string done =
        concat("quantized ", n_converted, " of ", plans.size(), " tensors of ", in_path, " to ",
               goal.name, o.pure ? " (pure)" : "", " into ", out_path);
    out.commit();
    log(log_level::info, done);
}

} // namespace pi
