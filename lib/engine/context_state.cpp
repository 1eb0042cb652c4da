// A context's saved state (docs/state.md): a header that names the model and the format, the
// last batch's logits, then the KV cache's cells.
#include <algorithm>
#include <cstring>

#include "engine/context.hpp"
#include "gguf/gguf.hpp"
#include "support/fnv1a.hpp"

namespace pi {

namespace {

constexpr char state_magic[8] = {'P', 'I', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr uint32_t state_version = 1;
// Bytes of the model file at each end that the fingerprint reads: the header and metadata at the
// start, the last tensor's data at the end.
constexpr size_t fingerprint_span = 1 << 16;

// Tells one model file from another without reading all of it.
uint64_t state_fingerprint(const model& m) noexcept {
    const std::span<const uint8_t> bytes = m.file().bytes();
    const size_t head = std::min(bytes.size(), fingerprint_span);
    const size_t tail = std::min(bytes.size() - head, fingerprint_span);
    const uint64_t size = bytes.size();
    uint64_t h = fnv1a(std::span(reinterpret_cast<const uint8_t*>(&size), sizeof size));
    h = fnv1a(bytes.first(head), h);
    return fnv1a(bytes.last(tail), h);
}

} // namespace

void context::save_state(int32_t seq, byte_writer& out) const {
    if (seq < -1 || seq >= options_.n_seq_max)
        fail(status::invalid_argument, "sequence ", seq, " is outside [-1, ", options_.n_seq_max,
             ")");
    out.bytes(state_magic, sizeof state_magic);
    out.put(state_version);
    out.put(state_fingerprint(model_));
    out.put(static_cast<int32_t>(model_.hp().n_vocab));
    // Logits belong to the whole last batch: saved with every sequence only.
    const int32_t outputs = seq == -1 ? n_outputs_ : 0;
    out.put(outputs);
    if (outputs > 0) {
        out.put(static_cast<uint32_t>(logits_row_of_token_.size()));
        out.bytes(logits_row_of_token_.data(), logits_row_of_token_.size() * sizeof(int32_t));
        out.bytes(logits_.data(), static_cast<size_t>(outputs) *
                                      static_cast<size_t>(model_.hp().n_vocab) * sizeof(float));
    }
    kv_.save(seq, out);
}

void context::load_state(int32_t seq, byte_reader& in) {
    if (seq < -1 || seq >= options_.n_seq_max)
        fail(status::invalid_argument, "sequence ", seq, " is outside [-1, ", options_.n_seq_max,
             ")");
    const std::span<const uint8_t> magic = in.take(sizeof state_magic, "the magic");
    if (std::memcmp(magic.data(), state_magic, sizeof state_magic) != 0)
        fail(status::format, "not a libpowerinfer state (bad magic)");
    const auto version = in.get<uint32_t>("the format version");
    if (version != state_version)
        fail(status::format, "the state has format version ", version, "; this library reads ",
             state_version);
    if (in.get<uint64_t>("the model fingerprint") != state_fingerprint(model_))
        fail(status::format, "the state was saved with another model");
    const auto n_vocab = in.get<int32_t>("the vocabulary size");
    if (n_vocab != model_.hp().n_vocab)
        fail(status::format, "the state has a vocabulary of ", n_vocab, " tokens; the model has ",
             model_.hp().n_vocab);
    const auto outputs = in.get<int32_t>("the logits count");
    if (outputs < 0 || outputs > options_.n_batch)
        fail(outputs < 0 ? status::format : status::context_full, "the state holds ", outputs,
             " rows of logits; this context keeps at most n_batch = ", options_.n_batch);
    std::vector<int32_t> row_of_token(logits_row_of_token_.size(), -1);
    std::vector<float> logits;
    if (outputs > 0) {
        const auto rows = in.get<uint32_t>("the batch size");
        const std::span<const uint8_t> map = in.take(rows * sizeof(int32_t), "the logits rows");
        std::vector<int32_t> saved(rows);
        if (rows > 0) std::memcpy(saved.data(), map.data(), map.size()); // no null memcpy
        for (uint32_t t = 0; t < rows; ++t) {
            if (saved[t] < -1 || saved[t] >= outputs)
                fail(status::format, "the state's logits row of token ", t, " is invalid");
            if (saved[t] < 0) continue;
            if (t >= row_of_token.size())
                fail(status::context_full, "the state's last batch had ", rows,
                     " tokens; this context's n_batch is ", row_of_token.size());
            row_of_token[t] = saved[t];
        }
        const size_t floats = static_cast<size_t>(outputs) * static_cast<size_t>(n_vocab);
        const std::span<const uint8_t> data = in.take(floats * sizeof(float), "the logits");
        logits.resize(floats);
        std::memcpy(logits.data(), data.data(), data.size());
    }
    kv_.load(seq, in);
    n_outputs_ = outputs;
    logits_row_of_token_ = std::move(row_of_token);
    std::copy(logits.begin(), logits.end(), logits_.begin());
}

} // namespace pi
