// Model quantization: plan every tensor first (so that a bad input fails before any work), then
// stream the output: the header goes out first (every size follows from type and shape), then
// each tensor, converted row-parallel in a oneTBB arena of n_threads a chunk at a time. Memory
// stays at one chunk whatever the model's size.
#include "model/quantize_model.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <limits>
#include <vector>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "support/log.hpp"

namespace pi {

namespace {

struct target {
    ggml_type type;
    uint32_t file_type;
};

constexpr std::array<target, 7> targets = {{
    {ggml_type::f32, 0},
    {ggml_type::f16, 1},
    {ggml_type::q4_0, 2},
    {ggml_type::q4_1, 3},
    {ggml_type::q8_0, 7},
    {ggml_type::q5_0, 8},
    {ggml_type::q5_1, 9},
}};

constexpr int max_threads = 1024;

const target* find_target(ggml_type type) noexcept {
    for (const target& t : targets)
        if (t.type == type) return &t;
    return nullptr;
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

bool is_predictor(std::string_view name) noexcept {
    return ends_with(name, ".fc1.weight") || ends_with(name, ".fc2.weight");
}

bool is_integer(ggml_type t) noexcept {
    return t == ggml_type::i8 || t == ggml_type::i16 || t == ggml_type::i32;
}

const char* type_name(ggml_type t) noexcept {
    const char* name = traits_of(t).name;
    return name ? name : "?";
}

// Same file, also through a symbolic or hard link: rename() over it would replace the input.
void refuse_same_file(const std::string& in_path, const std::string& out_path) {
    struct stat in_st {};
    struct stat out_st {};
    const bool same_name = in_path == out_path;
    const bool same_inode = ::stat(in_path.c_str(), &in_st) == 0 &&
                            ::stat(out_path.c_str(), &out_st) == 0 &&
                            in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino;
    if (same_name || same_inode)
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

// Drops input pages from this process once their data is written: they stay in the page cache,
// but without this the whole input model would count in the quantizer's RSS. The mapping is
// read-only, so the data stays readable (a later access reads the file again).
void release_pages(const uint8_t* data, size_t n_bytes) {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(data) + n_bytes;
    if (n_bytes != 0) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

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
void convert(const gguf::tensor_info& t, ggml_type to, tbb::task_arena& arena,
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
            tbb::parallel_for(tbb::blocked_range<int64_t>(first, last),
                              [&](const tbb::blocked_range<int64_t>& r) {
                                  const size_t at =
                                      static_cast<size_t>(r.begin() - first) * out_row;
                                  if (!convert_rows(t, to, r.begin(), r.end(), scratch.data() + at))
                                      ok.store(false);
                              });
        });
        if (!ok.load())
            fail(status::internal, "tensor '", t.name, "': no ", type_name(t.type), " -> ",
                 type_name(to), " conversion");
        out.append(std::span<const uint8_t>(scratch.data(), n_bytes));
        release_pages(t.data + static_cast<size_t>(first) * in_row,
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
        release_pages(t.data + at, n);
    }
}

} // namespace

ggml_type parse_quantize_type(std::string_view name) {
    for (const target& t : targets)
        if (iequals(name, traits_of(t.type).name)) return t.type;
    fail(status::invalid_argument, "quantization type '", name,
         "' is not one of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, F32");
}

uint32_t file_type_of(ggml_type type) {
    const target* t = find_target(type);
    if (!t)
        fail(status::invalid_argument, "type ", type_name(type), " is not a quantization target");
    return t->file_type;
}

tensor_plan plan_tensor(const gguf::tensor_info& t, const quantize_options& o) {
    if (t.n_dims != 2 || !ends_with(t.name, "weight") || is_integer(t.type)) return {t.type, {}};
    if (t.type != ggml_type::f32 && t.type != ggml_type::f16)
        fail(status::unsupported, "tensor '", t.name, "' is already ", type_name(t.type),
             "; requantizing is not supported, start from the F32 or F16 model");
    ggml_type to = o.type;
    if (is_predictor(t.name)) {
        if (o.keep_predictor) return {t.type, {}};
        to = o.type == ggml_type::q4_0 ? ggml_type::q4_0 : ggml_type::q5_0;
    }
    const uint32_t block = traits_of(to).block_size;
    if (t.ne[0] % block != 0)
        return {t.type, concat("tensor '", t.name, "': rows of ", t.ne[0],
                               " elements are not a multiple of the ", type_name(to),
                               " block size ", block, "; kept as ", type_name(t.type))};
    return {to, {}};
}

void quantize_model(const std::string& in_path, const std::string& out_path,
                    const quantize_options& o) {
    const uint32_t file_type = file_type_of(o.type);
    if (in_path.empty()) fail(status::invalid_argument, "the input path is empty");
    if (out_path.empty()) fail(status::invalid_argument, "the output path is empty");
    if (o.n_threads > max_threads)
        fail(status::invalid_argument, "n_threads ", o.n_threads, " is more than ", max_threads);
    refuse_same_file(in_path, out_path);

    const std::unique_ptr<gguf::file> f = gguf::file::open(in_path);
    if (f->alignment() > std::numeric_limits<uint32_t>::max())
        fail(status::unsupported, in_path, ": alignment ", f->alignment(), " is too large");
    std::vector<tensor_plan> plans;
    uint64_t total = 0;
    for (const gguf::tensor_info& t : f->tensors()) {
        plans.push_back(plan_tensor(t, o));
        total += static_cast<uint64_t>(t.n_elements());
    }

    gguf::writer w(f->sparse(), static_cast<uint32_t>(f->alignment()));
    for (const auto& [key, v] : f->metadata())
        w.set(key, v);
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", file_type);
    for (size_t i = 0; i < plans.size(); ++i) {
        const gguf::tensor_info& t = f->tensors()[i];
        const std::vector<int64_t> dims(t.ne, t.ne + t.n_dims);
        w.add_tensor_info(t.name, plans[i].type, dims);
    }

    gguf::tensor_stream out(w, out_path);
    tbb::task_arena arena(o.n_threads > 0 ? o.n_threads : tbb::task_arena::automatic);
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
    out.commit();
    log(log_level::info, concat("quantized ", n_converted, " of ", plans.size(), " tensors of ",
                                in_path, " to ", type_name(o.type), " into ", out_path));
}

} // namespace pi
