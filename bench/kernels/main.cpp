// pi-kernel-bench: times the CPU backend's kernels at each kernel level with 1 and 2 threads
// and compares the bytes they stream with the machine's measured read bandwidth.
//
// Weights cycle through copies spread over a set larger than the last-level cache (--mb), so
// memory-bound kernels are measured against DRAM, as in decoding a real model; --hot repeats
// one copy instead (cache-resident, compute-bound view). Numbers are the best of several rounds.
#include "cpu/cpu_backend.h"
#include "quant/types.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    size_t set_mb = 1024;
    bool hot = false;
    int rounds = 5;
    std::vector<int> threads = {1, 2};
    std::string only; // run only measurements whose name contains this
    std::vector<int32_t> levels = {PIB_CPU_KERNELS_SCALAR,       PIB_CPU_KERNELS_AVX2,
                                   PIB_CPU_KERNELS_AVX512,       PIB_CPU_KERNELS_NEON,
                                   PIB_CPU_KERNELS_NEON_DOTPROD, PIB_CPU_KERNELS_NEON_FP16};
};

double seconds(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Best time per call of f(i) over rounds of n calls (i = call index within the round).
double best_per_call(int rounds, int n, const std::function<void(int)>& f) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        const auto t0 = clock_type::now();
        for (int i = 0; i < n; ++i)
            f(i);
        best = std::min(best, seconds(t0, clock_type::now()) / n);
    }
    return best;
}

// Read bandwidth of n_threads threads each summing its share of `data`, in GB/s. Each thread
// reads four far-apart streams at once: one sequential stream per core stays well below what
// the memory system delivers (too few misses in flight).
double read_bandwidth(const std::vector<uint64_t>& data, int n_threads, int rounds) {
    constexpr size_t streams = 4;
    const size_t share = data.size() / static_cast<size_t>(n_threads) / streams * streams;
    std::vector<uint64_t> sums(static_cast<size_t>(n_threads) * 8);
    const double t = best_per_call(rounds, 1, [&](int) {
        std::vector<std::thread> pool;
        for (int k = 0; k < n_threads; ++k)
            pool.emplace_back([&, k] {
                const uint64_t* p = data.data() + share * static_cast<size_t>(k);
                const size_t len = share / streams;
                uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (size_t i = 0; i < len; ++i) {
                    s0 += p[i];
                    s1 += p[len + i];
                    s2 += p[2 * len + i];
                    s3 += p[3 * len + i];
                }
                sums[static_cast<size_t>(k) * 8] = s0 + s1 + s2 + s3;
            });
        for (auto& th : pool)
            th.join();
    });
    return static_cast<double>(share * static_cast<size_t>(n_threads) * sizeof(uint64_t)) / t / 1e9;
}

class bench {
  public:
    bench(int32_t level, int threads, std::vector<uint64_t>& arena) {
        ok_ = pib_cpu_backend_create_with(threads, 0, level, &b_) == PIB_OK;
        if (!ok_) return;
        pib_device_info info{};
        b_.vt->device_info(b_.ctx, &info);
        name_ = info.name;
        b_.vt->buffer_from_host(b_.ctx, arena.data(), arena.size() * sizeof(uint64_t), &arena_);
        b_.vt->buffer_alloc(b_.ctx, 64 << 20, &scratch_);
    }
    ~bench() {
        if (!ok_) return;
        b_.vt->buffer_free(b_.ctx, arena_);
        b_.vt->buffer_free(b_.ctx, scratch_);
        b_.vt->destroy(b_.ctx);
    }
    bench(const bench&) = delete;
    bench& operator=(const bench&) = delete;

    bool ok() const { return ok_; }
    const std::string& name() const { return name_; }
    const pib_vtable& vt() const { return *b_.vt; }
    void* ctx() const { return b_.ctx; }

    // A tensor at byte `offset` of the big weight arena.
    pib_tensor weight(pi::ggml_type type, int64_t ne0, int64_t ne1, size_t offset) const {
        return {static_cast<uint32_t>(type), ne0, ne1, pi::row_bytes(type, ne0), arena_, offset};
    }
    // A tensor in the small scratch buffer, filled from `values` (or zeros).
    pib_tensor scratch(pi::ggml_type type, int64_t ne0, int64_t ne1, const void* values = nullptr) {
        const size_t bytes = pi::row_bytes(type, ne0) * static_cast<size_t>(ne1);
        const pib_tensor t{static_cast<uint32_t>(type), ne0,      ne1,
                           pi::row_bytes(type, ne0),    scratch_, used_};
        auto* base = static_cast<unsigned char*>(b_.vt->buffer_host_ptr(b_.ctx, scratch_));
        if (values != nullptr)
            std::memcpy(base + used_, values, bytes);
        else
            std::memset(base + used_, 0, bytes);
        used_ += (bytes + 63) / 64 * 64;
        return t;
    }
    void reset_scratch() { used_ = 0; }

  private:
    pib_backend b_{};
    bool ok_ = false;
    std::string name_;
    pib_buffer* arena_ = nullptr;
    pib_buffer* scratch_ = nullptr;
    size_t used_ = 0;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

// Ascending random active lists with about `fraction` of n rows for each of n_tok tokens.
void active_lists(int64_t n, int64_t n_tok, double fraction, uint32_t seed,
                  std::vector<int32_t>& idx, std::vector<int32_t>& count) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(0.0, 1.0);
    idx.assign(static_cast<size_t>(n * n_tok), 0);
    count.assign(static_cast<size_t>(n_tok), 0);
    for (int64_t t = 0; t < n_tok; ++t)
        for (int32_t i = 0; i < n; ++i)
            if (dist(rng) < fraction) idx[static_cast<size_t>(t * n + count[t]++)] = i;
}

struct result {
    double seconds_per_call;
    double bytes_per_call; // streamed weight bytes (0: compute-bound, report GFLOP/s)
    double flops_per_call;
};

void print(const char* what, const bench& b, int threads, const result& r, double bandwidth) {
    std::printf("%-34s %-13s %2d thr %10.1f us", what, b.name().c_str(), threads,
                r.seconds_per_call * 1e6);
    if (r.bytes_per_call > 0) {
        const double gbs = r.bytes_per_call / r.seconds_per_call / 1e9;
        std::printf("  %7.2f GB/s  %5.1f%% of read bandwidth", gbs, 100.0 * gbs / bandwidth);
    }
    if (r.flops_per_call > 0)
        std::printf("  %7.1f GFLOP/s", r.flops_per_call / r.seconds_per_call / 1e9);
    std::printf("\n");
}

// Copies of a matrix of `bytes` bytes fitting the arena, each at its own offset.
int copies_of(size_t bytes, const std::vector<uint64_t>& arena, bool hot) {
    if (hot) return 1;
    return static_cast<int>(std::max<size_t>(1, arena.size() * sizeof(uint64_t) / bytes));
}

size_t offset_of(int copy, size_t bytes) {
    return static_cast<size_t>(copy) * ((bytes + 4095) / 4096 * 4096);
}

void run_level(int32_t level, int threads, std::vector<uint64_t>& arena, const options& o,
               double bandwidth) {
    bench b(level, threads, arena);
    if (!b.ok()) return;
    const auto& vt = b.vt();
    const bool scalar = level == PIB_CPU_KERNELS_SCALAR;
    const int rounds = scalar ? 1 : o.rounds;
    const int64_t d = 2048, ff = 5632;
    const auto x = random_floats(static_cast<size_t>(ff * 64), 1);
    const size_t up_bytes = pi::row_bytes(pi::ggml_type::f16, d) * static_cast<size_t>(ff);

    // Times f(copy) over the copies of a matrix of `bytes` (a few for the slow scalar kernels,
    // at most max_copies) and prints it; `streamed` bytes per call give GB/s, `flops` GFLOP/s.
    auto measure = [&](const std::string& what, size_t bytes, int max_copies, double streamed,
                       double flops, const std::function<void(size_t offset)>& f) {
        if (what.find(o.only) == std::string::npos) return;
        const int n = std::min(scalar ? 1 : max_copies, copies_of(bytes, arena, o.hot));
        const double t = best_per_call(rounds, n, [&](int i) { f(offset_of(i, bytes)); });
        print(what.c_str(), b, threads, {t, streamed, flops}, bandwidth);
    };
    constexpr int all_copies = 1 << 20;

    // Dense mat-vec: [cols][rows] weights times one token.
    auto matvec = [&](const char* what, pi::ggml_type type, int64_t cols, int64_t rows) {
        b.reset_scratch();
        const pib_tensor tx = b.scratch(pi::ggml_type::f32, cols, 1, x.data());
        const pib_tensor ty = b.scratch(pi::ggml_type::f32, rows, 1);
        const size_t bytes = pi::row_bytes(type, cols) * static_cast<size_t>(rows);
        measure(what, bytes, all_copies, static_cast<double>(bytes), 0, [&](size_t off) {
            const pib_tensor tw = b.weight(type, cols, rows, off);
            vt.mul_mat(b.ctx(), &tw, &tx, &ty);
        });
    };
    matvec("mat-vec F16 2048x5632", pi::ggml_type::f16, d, ff);
    matvec("mat-vec F16 5632x2048", pi::ggml_type::f16, ff, d);
    matvec("mat-vec F16 2048x2048", pi::ggml_type::f16, d, d);
    matvec("mat-vec F16 2048x256", pi::ggml_type::f16, d, 256);
    matvec("mat-vec F32 2048x5632", pi::ggml_type::f32, d, ff);
    // The arena's F16 patterns read as blocks give finite scales and random codes.
    matvec("mat-vec Q4_0 2048x5632", pi::ggml_type::q4_0, d, ff);
    matvec("mat-vec Q8_0 2048x5632", pi::ggml_type::q8_0, d, ff);
    matvec("mat-vec Q4_K 2048x5632", pi::ggml_type::q4_k, d, ff);
    matvec("mat-vec Q6_K 2048x5632", pi::ggml_type::q6_k, d, ff);
    // The shapes of a Q4_0 bench model's decode besides the FFN: Q and O, K and V and the
    // predictor's fc1, the predictor's fc2.
    matvec("mat-vec Q4_0 2048x2048", pi::ggml_type::q4_0, d, d);
    matvec("mat-vec Q4_0 2048x256", pi::ggml_type::q4_0, d, 256);
    matvec("mat-vec Q4_0 256x5632", pi::ggml_type::q4_0, 256, ff);

    // Row-sparse mat-vec over 10% of ffn_up's rows, and the column-sparse accumulate over the
    // same share of ffn_down_t's rows: the bytes are those of the active rows.
    {
        std::vector<int32_t> idx, count;
        active_lists(ff, 1, 0.1, 7, idx, count);
        b.reset_scratch();
        const pib_tensor tx = b.scratch(pi::ggml_type::f32, d, 1, x.data());
        const pib_tensor ta = b.scratch(pi::ggml_type::f32, ff, 1, x.data());
        const pib_tensor ty = b.scratch(pi::ggml_type::f32, ff, 1);
        const pib_tensor tyd = b.scratch(pi::ggml_type::f32, d, 1);
        const pib_tensor ti = b.scratch(pi::ggml_type::i32, ff, 1, idx.data());
        const pib_tensor tc = b.scratch(pi::ggml_type::i32, 1, 1, count.data());
        const double active = static_cast<double>(count[0]) * pi::row_bytes(pi::ggml_type::f16, d);
        measure("sparse mat-vec F16 2048x5632 10%", up_bytes, all_copies, active, 0,
                [&](size_t off) {
                    const pib_tensor tw = b.weight(pi::ggml_type::f16, d, ff, off);
                    vt.mul_mat_sparse(b.ctx(), &tw, &tx, &ti, &tc, &ty);
                });
        measure("sparse axpy F16 2048x5632 10%", up_bytes, all_copies, active, 0, [&](size_t off) {
            const pib_tensor tw = b.weight(pi::ggml_type::f16, d, ff, off);
            vt.axpy_sparse(b.ctx(), &tw, &ta, &ti, &tc, &tyd);
        });
        // Dense mode's down projection on a sparse file: the accumulate over every row.
        std::vector<int32_t> all_idx, all_count;
        active_lists(ff, 1, 1.0, 7, all_idx, all_count);
        const pib_tensor tai = b.scratch(pi::ggml_type::i32, ff, 1, all_idx.data());
        const pib_tensor tac = b.scratch(pi::ggml_type::i32, 1, 1, all_count.data());
        for (pi::ggml_type type : {pi::ggml_type::q4_0, pi::ggml_type::q4_k, pi::ggml_type::q6_k}) {
            const std::string name = pi::traits_of(static_cast<uint32_t>(type)).name;
            const size_t bytes = pi::row_bytes(type, d) * static_cast<size_t>(ff);
            const double active_bytes = static_cast<double>(count[0]) * pi::row_bytes(type, d);
            measure("sparse mat-vec " + name + " 2048x5632 10%", bytes, all_copies, active_bytes, 0,
                    [&](size_t off) {
                        const pib_tensor tw = b.weight(type, d, ff, off);
                        vt.mul_mat_sparse(b.ctx(), &tw, &tx, &ti, &tc, &ty);
                    });
            measure("sparse axpy " + name + " 2048x5632 10%", bytes, all_copies, active_bytes, 0,
                    [&](size_t off) {
                        const pib_tensor tw = b.weight(type, d, ff, off);
                        vt.axpy_sparse(b.ctx(), &tw, &ta, &ti, &tc, &tyd);
                    });
            measure("axpy " + name + " 2048x5632 all rows", bytes, all_copies,
                    static_cast<double>(bytes), 0, [&](size_t off) {
                        const pib_tensor tw = b.weight(type, d, ff, off);
                        vt.axpy_sparse(b.ctx(), &tw, &ta, &tai, &tac, &tyd);
                    });
        }
    }

    // Prompt batches: weights reused by every token, so count FLOPs.
    const pi::ggml_type batch_types[] = {pi::ggml_type::f16, pi::ggml_type::q4_0,
                                         pi::ggml_type::q8_0, pi::ggml_type::q4_k,
                                         pi::ggml_type::q6_k};
    for (pi::ggml_type type : batch_types) {
        const std::string name = pi::traits_of(static_cast<uint32_t>(type)).name;
        const size_t bytes = pi::row_bytes(type, d) * static_cast<size_t>(ff);
        for (int64_t n_tok : {8, 64}) {
            b.reset_scratch();
            const pib_tensor tx = b.scratch(pi::ggml_type::f32, d, n_tok, x.data());
            const pib_tensor ty = b.scratch(pi::ggml_type::f32, ff, n_tok);
            measure("mat-mat " + name + " 2048x5632 x" + std::to_string(n_tok) + " tok", bytes, 8,
                    0, 2.0 * d * ff * n_tok, [&](size_t off) {
                        const pib_tensor tw = b.weight(type, d, ff, off);
                        vt.mul_mat(b.ctx(), &tw, &tx, &ty);
                    });
        }
        // The sparse FFN of a prompt (10% of the neurons per token) and dense mode's down
        // projection, an accumulate over every neuron.
        for (double fraction : {0.1, 1.0}) {
            const int64_t n_tok = 64;
            const std::string what =
                name + " 2048x5632 x64 " + std::to_string(static_cast<int>(fraction * 100)) + "%";
            std::vector<int32_t> idx, count;
            active_lists(ff, n_tok, fraction, 9, idx, count);
            b.reset_scratch();
            const pib_tensor tx = b.scratch(pi::ggml_type::f32, d, n_tok, x.data());
            const pib_tensor ta = b.scratch(pi::ggml_type::f32, ff, n_tok, x.data());
            const pib_tensor ty = b.scratch(pi::ggml_type::f32, ff, n_tok);
            const pib_tensor tyd = b.scratch(pi::ggml_type::f32, d, n_tok);
            const pib_tensor ti = b.scratch(pi::ggml_type::i32, ff, n_tok, idx.data());
            const pib_tensor tc = b.scratch(pi::ggml_type::i32, n_tok, 1, count.data());
            const double flops = 2.0 * d * std::accumulate(count.begin(), count.end(), 0.0);
            if (fraction < 1.0) {
                measure("sparse mat-mat " + what, bytes, 8, 0, flops, [&](size_t off) {
                    const pib_tensor tw = b.weight(type, d, ff, off);
                    vt.mul_mat_sparse(b.ctx(), &tw, &tx, &ti, &tc, &ty);
                });
                // An FFN's up and gate: two matrices sharing the lists, in one call.
                const pib_tensor ty2 = b.scratch(pi::ggml_type::f32, ff, n_tok);
                measure("sparse mat-mat pair " + what, 2 * bytes, 8, 0, 2 * flops, [&](size_t off) {
                    const pib_tensor tw0 = b.weight(type, d, ff, off);
                    const pib_tensor tw1 = b.weight(type, d, ff, off + bytes);
                    vt.mul_mat_sparse2(b.ctx(), &tw0, &tw1, &tx, &ti, &tc, &ty, &ty2);
                });
            }
            measure("sparse axpy " + what, bytes, 8, 0, flops, [&](size_t off) {
                const pib_tensor tw = b.weight(type, d, ff, off);
                vt.axpy_sparse(b.ctx(), &tw, &ta, &ti, &tc, &tyd);
            });
        }
    }

    // Per-call cost of tiny kernels: what each of decode's ~300 kernels per token pays.
    {
        b.reset_scratch();
        const pib_tensor ta = b.scratch(pi::ggml_type::f32, d, 1, x.data());
        const pib_tensor tb = b.scratch(pi::ggml_type::f32, d, 1, x.data());
        const pib_tensor tw = b.scratch(pi::ggml_type::f16, 256, 64, x.data());
        const pib_tensor tx = b.scratch(pi::ggml_type::f32, 256, 1, x.data());
        const pib_tensor ty = b.scratch(pi::ggml_type::f32, 64, 1);
        auto repeat = [&](const char* what, const std::function<void()>& f) {
            if (std::string(what).find(o.only) == std::string::npos) return;
            const double t = best_per_call(rounds, 2000, [&](int) { f(); });
            print(what, b, threads, {t, 0, 0}, bandwidth);
        };
        repeat("add 2048 (per-call cost)", [&] { vt.add(b.ctx(), &ta, &tb, &ta); });
        repeat("mat-vec F16 256x64 (per-call cost)", [&] { vt.mul_mat(b.ctx(), &tw, &tx, &ty); });
    }
}

int usage() {
    std::fprintf(stderr, "usage: pi-kernel-bench [--mb N] [--hot] [--rounds N] [--threads 1,2] "
                         "[--only S] [--levels L]\n"
                         "  --mb N       weight set in MiB, beyond the last-level cache "
                         "(default 1024)\n"
                         "  --hot        repeat one weight copy (cache-resident)\n"
                         "  --rounds N   rounds per measurement, best kept (default 5)\n"
                         "  --threads L  comma-separated thread counts (default 1,2)\n"
                         "  --only S     only the measurements whose name contains S\n"
                         "  --levels L   kernel levels among scalar,avx2,avx512,neon,neon_dotprod,"
                         "neon_fp16 (default all)\n");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--mb" && has_value) {
            o.set_mb = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "--levels" && has_value) {
            o.levels.clear();
            const std::string list = std::string(argv[++i]) + ",";
            for (size_t at = 0, comma; (comma = list.find(',', at)) != std::string::npos;
                 at = comma + 1) {
                const std::string name = list.substr(at, comma - at);
                if (name == "scalar")
                    o.levels.push_back(PIB_CPU_KERNELS_SCALAR);
                else if (name == "avx2")
                    o.levels.push_back(PIB_CPU_KERNELS_AVX2);
                else if (name == "avx512")
                    o.levels.push_back(PIB_CPU_KERNELS_AVX512);
                else if (name == "neon")
                    o.levels.push_back(PIB_CPU_KERNELS_NEON);
                else if (name == "neon_dotprod")
                    o.levels.push_back(PIB_CPU_KERNELS_NEON_DOTPROD);
                else if (name == "neon_fp16")
                    o.levels.push_back(PIB_CPU_KERNELS_NEON_FP16);
                else
                    return usage();
            }
        } else if (a == "--only" && has_value) {
            o.only = argv[++i];
        } else if (a == "--hot") {
            o.hot = true;
        } else if (a == "--rounds" && has_value) {
            o.rounds = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--threads" && has_value) {
            o.threads.clear();
            for (const char* p = argv[++i]; *p != '\0';) {
                char* end = nullptr;
                o.threads.push_back(std::max(1, static_cast<int>(std::strtol(p, &end, 10))));
                p = *end == ',' ? end + 1 : end;
                if (end == p && *p != '\0') return usage();
            }
        } else {
            return usage();
        }
    }
    if (o.set_mb < 64 || o.threads.empty()) return usage();

    // Random F16 bit patterns of values in [-1, 1] fill the weight arena (and make the memory
    // resident before anything is timed).
    std::vector<uint64_t> arena(o.set_mb << 17);
    {
        const auto v = random_floats(4096, 3);
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i)
            h[i] = pi::fp32_to_fp16(v[i]);
        auto* p = reinterpret_cast<unsigned char*>(arena.data());
        const size_t total = arena.size() * sizeof(uint64_t);
        for (size_t off = 0; off < total; off += h.size() * sizeof(uint16_t))
            std::memcpy(p + off, h.data(), std::min(h.size() * sizeof(uint16_t), total - off));
    }
    std::printf("weight set %zu MiB%s\n", o.set_mb, o.hot ? " (hot: one copy repeated)" : "");
    std::vector<double> bandwidth;
    for (int t : o.threads) {
        bandwidth.push_back(read_bandwidth(arena, t, o.rounds));
        std::printf("read bandwidth %d thr: %.2f GB/s\n", t, bandwidth.back());
    }
    for (int32_t level : o.levels)
        for (size_t k = 0; k < o.threads.size(); ++k)
            run_level(level, o.threads[k], arena, o, bandwidth[k]);
    return 0;
}
