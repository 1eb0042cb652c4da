// sampler::save and sampler::load: the blob layout is in docs/sampling.md.
#include <bit>
#include <cstring>
#include <sstream>
#include <string>

#include "sampling/sampler.hpp"
#include "support/error.hpp"

namespace pi {
namespace {

constexpr char magic[4] = {'P', 'I', 'S', 'M'};
constexpr uint32_t version = 1;

// Little-endian writes, whatever the host.
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i)
        out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i)
        out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_tokens(std::vector<uint8_t>& out, const std::vector<int32_t>& tokens) {
    put_u32(out, static_cast<uint32_t>(tokens.size()));
    for (int32_t t : tokens)
        put_u32(out, static_cast<uint32_t>(t));
}

class blob_reader {
  public:
    explicit blob_reader(std::span<const uint8_t> blob) : blob_(blob) {}
    std::span<const uint8_t> take(size_t n, const char* what) {
        if (blob_.size() - at_ < n)
            fail(status::format, "the sampler state is truncated: ", what, " needs ", n,
                 " bytes at offset ", at_, " of a ", blob_.size(), "-byte blob");
        const auto s = blob_.subspan(at_, n);
        at_ += n;
        return s;
    }
    uint32_t u32(const char* what) {
        const auto s = take(4, what);
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i)
            v |= static_cast<uint32_t>(s[static_cast<size_t>(i)]) << (8 * i);
        return v;
    }
    uint64_t u64(const char* what) {
        const uint64_t lo = u32(what);
        return lo | (static_cast<uint64_t>(u32(what)) << 32);
    }
    std::vector<int32_t> tokens(const char* what, size_t max_count, int32_t n_vocab) {
        const uint32_t n = u32(what);
        if (n > max_count)
            fail(status::format, "the sampler state holds ", n, " ", what,
                 ", more than this sampler keeps (", max_count, ")");
        // The size check before the allocation: a corrupt count cannot ask for gigabytes.
        if (left() / 4 < n)
            fail(status::format, "the sampler state is truncated: ", n, " ", what, " need ",
                 size_t{4} * n, " bytes at offset ", at_, " of a ", blob_.size(), "-byte blob");
        std::vector<int32_t> out(n);
        for (uint32_t i = 0; i < n; ++i) {
            const auto t = static_cast<int32_t>(u32(what));
            if (t < 0 || (n_vocab > 0 && t >= n_vocab))
                fail(status::format, "the sampler state holds token ", t, " in its ", what,
                     ", outside the vocabulary");
            out[i] = t;
        }
        return out;
    }
    size_t left() const noexcept { return blob_.size() - at_; }

  private:
    std::span<const uint8_t> blob_;
    size_t at_ = 0;
};

// FNV-1a over the configuration the state depends on.
class fingerprint_hash {
  public:
    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i)
            h_ = (h_ ^ b[i]) * 0x100000001b3ull;
    }
    void i32(int32_t v) { bytes(&v, sizeof v); }
    void f32(float v) { i32(std::bit_cast<int32_t>(v)); }
    void str(const std::string& s) {
        i32(static_cast<int32_t>(s.size()));
        bytes(s.data(), s.size());
    }
    uint64_t value() const noexcept { return h_; }

  private:
    uint64_t h_ = 0xcbf29ce484222325ull;
};

} // namespace

// The seed is left out: a sampler made again with a fresh (random) seed takes the saved state.
uint64_t sampler::fingerprint() const {
    const sampler_options& o = options_;
    fingerprint_hash h;
    for (float f :
         {o.temperature, o.top_p, o.min_p, o.typical_p, o.dynatemp_range, o.dynatemp_exponent,
          o.repeat_penalty, o.frequency_penalty, o.presence_penalty, o.dry_multiplier, o.dry_base,
          o.xtc_probability, o.xtc_threshold, o.mirostat_tau, o.mirostat_eta})
        h.f32(f);
    for (int32_t i : {o.top_k, o.penalty_last_n, o.dry_allowed_length, o.dry_penalty_last_n,
                      o.mirostat, o.min_keep, n_vocab_, constraint_ ? 1 : 0})
        h.i32(i);
    h.i32(static_cast<int32_t>(o.dry_sequence_breakers.size()));
    for (const std::string& s : o.dry_sequence_breakers)
        h.str(s);
    h.i32(static_cast<int32_t>(o.logit_biases.size()));
    for (const logit_bias& b : o.logit_biases) {
        h.i32(b.token);
        h.f32(b.bias);
    }
    h.i32(static_cast<int32_t>(o.stages.size()));
    for (sampler_stage s : o.stages)
        h.i32(static_cast<int32_t>(s));
    h.str(o.constraint_source);
    return h.value();
}

void sampler::save(std::vector<uint8_t>& out) const {
    out.insert(out.end(), std::begin(magic), std::end(magic));
    put_u32(out, version);
    put_u64(out, fingerprint());
    put_u32(out, std::bit_cast<uint32_t>(mu_));
    std::ostringstream rng_text;
    throw_on_stream_failure(rng_text);
    rng_text << rng_;
    const std::string text = rng_text.str();
    put_u32(out, static_cast<uint32_t>(text.size()));
    out.insert(out.end(), text.begin(), text.end());
    put_tokens(out, history_.tokens());
    put_tokens(out, constrained_tokens_);
}

void sampler::load(std::span<const uint8_t> blob) {
    blob_reader in(blob);
    const auto head = in.take(sizeof magic, "the magic");
    if (std::memcmp(head.data(), magic, sizeof magic) != 0)
        fail(status::format, "not a sampler state (its magic is not PISM)");
    const uint32_t v = in.u32("the version");
    if (v != version)
        fail(status::format, "sampler state version ", v, "; this library reads version ", version);
    if (in.u64("the configuration fingerprint") != fingerprint())
        fail(status::format,
             "the sampler state was saved by a differently configured sampler (its options, "
             "vocabulary or constraint differ)");
    const float mu = std::bit_cast<float>(in.u32("mirostat mu"));
    if (!std::isfinite(mu)) fail(status::format, "the sampler state's mirostat mu is not finite");
    const uint32_t text_size = in.u32("the generator state");
    const auto text = in.take(text_size, "the generator state");
    std::mt19937 rng;
    std::istringstream rng_text(std::string(text.begin(), text.end()));
    rng_text >> rng;
    if (rng_text.fail() || !(rng_text >> std::ws).eof())
        fail(status::format, "the sampler state's generator state is malformed");
    std::vector<int32_t> history = in.tokens("history tokens", history_.capacity(), n_vocab_);
    std::vector<int32_t> constrained =
        in.tokens("constraint tokens", constraint_ ? SIZE_MAX : 0, n_vocab_);
    if (in.left() != 0)
        fail(status::format, "the sampler state has ", in.left(), " bytes after its end");

    if (constraint_) {
        const auto replay = [&](const std::vector<int32_t>& tokens) {
            constraint_->reset();
            for (int32_t t : tokens)
                constraint_->accept(t);
        };
        try {
            replay(constrained);
        } catch (const std::exception& e) {
            replay(constrained_tokens_);
            fail(status::format, "the constraint rejects the sampler state's tokens: ", e.what());
        }
    }
    token_history restored(history_.capacity());
    for (int32_t t : history)
        restored.push(t);
    history_ = std::move(restored);
    constrained_tokens_ = std::move(constrained);
    mu_ = mu;
    rng_ = rng;
}

} // namespace pi
