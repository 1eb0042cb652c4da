// Saved state: a context's KV cache, tokens and logits, with a sampler's state, to memory or a
// file (docs/state.md).
#include <cstring>
#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "engine/context.hpp"
#include "formats/read_file.hpp"
#include "support/byte_stream.hpp"
#include "support/file_sink.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

// The blob: the context's part, then whether a sampler's state follows, then that state.
std::vector<uint8_t> state_blob(const pi_context& ctx, int32_t seq, const pi_sampler* sampler) {
    std::vector<uint8_t> context_part;
    byte_writer part(context_part);
    ctx.impl->save_state(seq, part);
    std::vector<uint8_t> blob;
    byte_writer out(blob);
    out.put(static_cast<uint64_t>(context_part.size()));
    out.bytes(context_part.data(), context_part.size());
    std::vector<uint8_t> sampler_part;
    if (sampler) sampler->impl->save(sampler_part);
    out.put(static_cast<uint8_t>(sampler ? 1 : 0));
    out.put(static_cast<uint64_t>(sampler_part.size()));
    out.bytes(sampler_part.data(), sampler_part.size());
    return blob;
}

// Loads the sampler's part first, keeping its old state to put back if the context's part fails.
void load_blob(pi_context& ctx, int32_t seq, pi_sampler* sampler, std::span<const uint8_t> data) {
    byte_reader in(data, "the state");
    const auto context_size = in.get<uint64_t>("the context part's size");
    const std::span<const uint8_t> context_part = in.take(context_size, "the context part");
    const bool has_sampler = in.get<uint8_t>("the sampler flag") != 0;
    const auto sampler_size = in.get<uint64_t>("the sampler part's size");
    const std::span<const uint8_t> sampler_part = in.take(sampler_size, "the sampler part");
    in.expect_end();
    if (sampler && !has_sampler)
        fail(status::format, "the state holds no sampler state; pass NULL as the sampler");
    std::vector<uint8_t> previous;
    if (sampler) {
        sampler->impl->save(previous);
        sampler->impl->load(sampler_part);
    }
    try {
        byte_reader context_in(context_part, "the state");
        ctx.impl->load_state(seq, context_in);
    } catch (...) {
        if (sampler) sampler->impl->load(previous);
        throw;
    }
}

} // namespace

extern "C" {

pi_status pi_context_state_save(pi_context* ctx, pi_seq_id seq, const pi_sampler* sampler,
                                void* buf, size_t capacity, size_t* len) {
    return guard([&] {
        require(ctx, "ctx");
        require(len, "len");
        *len = 0;
        if (!buf && capacity > 0) fail(status::invalid_argument, "argument 'buf' is NULL");
        const std::vector<uint8_t> blob = state_blob(*ctx, seq, sampler);
        *len = blob.size();
        if (!buf && capacity == 0) return PI_OK;
        if (blob.size() > capacity)
            fail(status::invalid_argument, "state buffer holds ", capacity, " bytes, ", blob.size(),
                 " needed");
        std::memcpy(buf, blob.data(), blob.size());
        return PI_OK;
    });
}

pi_status pi_context_state_load(pi_context* ctx, pi_seq_id seq, pi_sampler* sampler,
                                const void* data, size_t len) {
    return guard([&] {
        require(ctx, "ctx");
        require(data, "data");
        load_blob(*ctx, seq, sampler,
                  std::span<const uint8_t>(static_cast<const uint8_t*>(data), len));
        return PI_OK;
    });
}

pi_status pi_context_state_save_file(pi_context* ctx, pi_seq_id seq, const pi_sampler* sampler,
                                     const char* path) {
    return guard([&] {
        require(ctx, "ctx");
        require(path, "path");
        const std::vector<uint8_t> blob = state_blob(*ctx, seq, sampler);
        file_sink out(path);
        out.bytes(blob.data(), blob.size());
        out.commit(path);
        return PI_OK;
    });
}

pi_status pi_context_state_load_file(pi_context* ctx, pi_seq_id seq, pi_sampler* sampler,
                                     const char* path) {
    return guard([&] {
        require(ctx, "ctx");
        require(path, "path");
        // Read, not mapped: a state file truncated or rewritten meanwhile is a clean error.
        const formats::file_contents file = formats::read_file(path);
        load_blob(*ctx, seq, sampler, file.bytes());
        return PI_OK;
    });
}

} // extern "C"
