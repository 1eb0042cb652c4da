// The tokenizers on arbitrary bytes (docs/tokenizer.md). The first input byte chooses the
// tokenizer and the mode, the rest is the text to encode (any bytes, invalid UTF-8 included) or,
// in decode mode, 16-bit little-endian token ids, so that ids in and out of the vocabulary both
// occur. Encoding must never fail for the SPM vocabulary nor for the byte-level BPE one (it
// spells all 256 bytes); every id it returns must be in range and decode again. Decoding an id
// outside the vocabulary must be a pi::error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_outcome.hpp"
#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "tokenizer/byte_alphabet.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

// The really-trained fixture's SPM vocabulary (4096 tokens, byte fallback).
const pi::tokenizer& spm() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(PI_FUZZ_SPM_VOCAB));
    return *t;
}

// A byte-level BPE vocabulary in GPT-2's byte alphabet: the 256 byte characters, a few merges
// whose results chain ("Ġt" + "he"), a merge whose result is no token, and special tokens of
// each kind that parse_special looks for.
pi::vocab small_bpe_vocab(pi::bpe_pre pre) {
    pi::vocab v;
    v.model = pi::vocab_model::bpe;
    v.pre = pre;
    for (int b = 0; b < 256; ++b)
        v.text.push_back(pi::byte_alphabet::text(static_cast<uint8_t>(b)));
    const std::string space = pi::byte_alphabet::text(' ');
    const std::vector<std::pair<std::string, std::string>> merges = {
        {space, "t"}, {"h", "e"}, {space + "t", "he"}, {"i", "n"},  {"in", "g"},
        {space, "a"}, {"e", "r"}, {"o", "u"},          {"ou", "t"}, {space + "a", "nd"},
    };
    for (const auto& [left, right] : merges) {
        v.merges.push_back(left + " " + right);
        if (left + right != space + "and") v.text.push_back(left + right);
    }
    v.type.assign(v.text.size(), pi::token_type::normal);
    const auto add_special = [&](const std::string& text, pi::token_type type) {
        v.text.push_back(text);
        v.type.push_back(type);
        return static_cast<int32_t>(v.text.size() - 1);
    };
    v.bos = v.eos = add_special("<|endoftext|>", pi::token_type::control);
    add_special(">>ABSTRACT<<", pi::token_type::control);
    add_special("<|user|>", pi::token_type::user_defined);
    v.unk = -1;
    v.score.assign(v.text.size(), 0.0f);
    v.add_bos_token = true;
    return v;
}

const pi::tokenizer& bpe(pi::bpe_pre pre) {
    static const std::unique_ptr<pi::tokenizer> falcon =
        pi::tokenizer::from_vocab(small_bpe_vocab(pi::bpe_pre::falcon));
    static const std::unique_ptr<pi::tokenizer> gpt2 =
        pi::tokenizer::from_vocab(small_bpe_vocab(pi::bpe_pre::gpt2));
    return pre == pi::bpe_pre::falcon ? *falcon : *gpt2;
}

void encode_and_decode(const pi::tokenizer& t, std::string_view text, bool add_bos,
                       bool parse_special) {
    const std::vector<int32_t> ids = t.encode(text, add_bos, parse_special);
    for (const int32_t id : ids) {
        if (id < 0 || id >= t.n_tokens()) __builtin_trap();
        (void)t.piece(id);
        (void)t.is_eog(id);
    }
    (void)t.decode(ids.data(), ids.size());
}

void decode_ids(const pi::tokenizer& t, const uint8_t* data, size_t size) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < size; i += 2)
        ids.push_back(static_cast<int16_t>(data[i] | data[i + 1] << 8));
    bool in_range = true;
    for (const int32_t id : ids) {
        (void)t.is_eog(id);
        in_range = in_range && id >= 0 && id < t.n_tokens();
    }
    try {
        (void)t.decode(ids.data(), ids.size());
    } catch (const pi::error&) {
        if (in_range) __builtin_trap(); // only a bad id may make decoding fail
        return;
    }
    if (!in_range) __builtin_trap(); // a bad id must not decode
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    const pi::tokenizer& t =
        mode & 1 ? bpe(mode & 2 ? pi::bpe_pre::gpt2 : pi::bpe_pre::falcon) : spm();
    if (mode & 16) {
        decode_ids(t, data + 1, size - 1);
    } else {
        const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
        encode_and_decode(t, text, mode & 4, mode & 8);
    }
    pi::fuzz::note_accepted(); // every input is, with its invariants checked
    return 0;
}
