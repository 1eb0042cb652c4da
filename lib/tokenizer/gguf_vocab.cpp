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

// tokenizer.ggml.pre names the pre-tokenizer. Files written before the key existed (PowerInfer's
// converters) hold Falcon's vocabulary, or GPT-2's for OPT, whose Hugging Face tokenizer is the
// plain GPT-2 regex.
bpe_pre read_pre_tokenizer(const gguf::file& f) {
    const gguf::value* v = f.find("tokenizer.ggml.pre");
    if (!v)
        return f.get_string("general.architecture", "") == "opt" ? bpe_pre::gpt2 : bpe_pre::falcon;
    const std::string pre = f.get_string("tokenizer.ggml.pre");
    if (pre == "falcon") return bpe_pre::falcon;
    if (pre == "gpt-2") return bpe_pre::gpt2;
    fail(status::unsupported, "tokenizer.ggml.pre = \"", pre,
         "\" is a BPE pre-tokenizer this engine does not implement (it has \"falcon\" and ",
         "\"gpt-2\")");
}

} // namespace

std::unique_ptr<tokenizer> tokenizer::from_gguf(const gguf::file& f) {
    const std::string model = f.get_string("tokenizer.ggml.model");
    if (model != "llama" && model != "gpt2")
        fail(status::format, "tokenizer.ggml.model = \"", model,
             "\" is not a known tokenizer model (expected \"llama\" or \"gpt2\")");
    const bool bpe = model == "gpt2";

    vocab v;
    v.model = bpe ? vocab_model::bpe : vocab_model::spm;
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
    // llama.cpp's defaults: BOS = EOS = 11 (<|endoftext|> of Falcon) and no unknown for BPE.
    v.bos = read_special_id(f, "tokenizer.ggml.bos_token_id", bpe ? 11 : 1);
    v.eos = read_special_id(f, "tokenizer.ggml.eos_token_id", bpe ? 11 : 2);
    v.unk = read_special_id(f, "tokenizer.ggml.unknown_token_id", bpe ? -1 : 0);
    v.sep = read_special_id(f, "tokenizer.ggml.seperator_token_id", -1);
    v.pad = read_special_id(f, "tokenizer.ggml.padding_token_id", -1);
    v.eot = read_special_id(f, "tokenizer.ggml.eot_token_id", -1);
    v.chat_template = f.get_string("tokenizer.chat_template", "");
    if (bpe) {
        v.merges = f.get_string_array("tokenizer.ggml.merges");
        v.pre = read_pre_tokenizer(f);
        if (f.find("tokenizer.ggml.add_bos_token"))
            v.add_bos_token = f.get_bool("tokenizer.ggml.add_bos_token", false);
    }
    return from_vocab(std::move(v));
}

} // namespace pi
