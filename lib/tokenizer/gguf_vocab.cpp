// tokenizer::from_gguf: the tokenizer.ggml.* keys (docs/tokenizer.md) into a vocab.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {
namespace {

// Special ids are written as u32 (i32 by some converters); u32 0xFFFFFFFF is how -1 ("none")
// comes out of an unsigned field. Range checks against the vocabulary happen in from_vocab.
int32_t read_special_id(const gguf::file& f, const char* key, int32_t def) {
    const gguf::value* v = f.find(key);
    if (!v) return def;
    if (const auto* u = std::get_if<uint64_t>(&v->data)) {
        if (*u <= static_cast<uint64_t>(INT32_MAX)) return static_cast<int32_t>(*u);
        if (v->type == gguf::value_type::u32 && *u == UINT32_MAX) return -1;
        fail(status::format, key, " = ", *u, " is not a token id");
    }
    if (const auto* i = std::get_if<int64_t>(&v->data)) {
        if (*i >= -1 && *i <= INT32_MAX) return static_cast<int32_t>(*i);
        fail(status::format, key, " = ", *i, " is not a token id");
    }
    fail(status::format, key, " has type ", gguf::value_type_name(v->type),
         ", expected an integer token id");
}

} // namespace

std::unique_ptr<tokenizer> tokenizer::from_gguf(const gguf::file& f) {
    const std::string model = f.get_string("tokenizer.ggml.model");
    if (model == "gpt2")
        fail(status::unsupported,
             "BPE tokenizer (tokenizer.ggml.model = gpt2) is not supported yet");
    if (model != "llama")
        fail(status::format, "tokenizer.ggml.model = \"", model,
             "\" is not a known tokenizer model (expected \"llama\")");

    vocab v;
    v.text = f.get_string_array("tokenizer.ggml.tokens");
    // Present-but-empty arrays must fail the length check rather than read as absent.
    if (f.find("tokenizer.ggml.scores")) {
        v.score = f.get_f32_array("tokenizer.ggml.scores");
        if (v.score.size() != v.text.size())
            fail(status::format, "tokenizer.ggml.scores has ", v.score.size(),
                 " entries but tokenizer.ggml.tokens has ", v.text.size());
    }
    if (f.find("tokenizer.ggml.token_type")) {
        const std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
        if (types.size() != v.text.size())
            fail(status::format, "tokenizer.ggml.token_type has ", types.size(),
                 " entries but tokenizer.ggml.tokens has ", v.text.size());
        v.type.reserve(types.size());
        for (const int32_t t : types)
            v.type.push_back(static_cast<token_type>(t));
    }
    v.bos = read_special_id(f, "tokenizer.ggml.bos_token_id", 1);
    v.eos = read_special_id(f, "tokenizer.ggml.eos_token_id", 2);
    v.unk = read_special_id(f, "tokenizer.ggml.unknown_token_id", 0);
    v.sep = read_special_id(f, "tokenizer.ggml.seperator_token_id", -1);
    v.pad = read_special_id(f, "tokenizer.ggml.padding_token_id", -1);
    v.eot = read_special_id(f, "tokenizer.ggml.eot_token_id", -1);
    v.chat_template = f.get_string("tokenizer.chat_template", "");
    return from_vocab(std::move(v));
}

} // namespace pi
