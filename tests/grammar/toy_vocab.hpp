#pragma once
// Hand-made vocabularies for the grammar tests: <unk> 0, <s> 1 (control), </s> 2 (control, EOS),
// then the given texts; "<0xXX>" texts become byte tokens, "▁" stands for a space as in SPM.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace pi::test {

inline std::unique_ptr<tokenizer> toy_tokenizer(const std::vector<std::string>& texts) {
    vocab v;
    v.text = {"<unk>", "<s>", "</s>"};
    v.type = {token_type::unknown, token_type::control, token_type::control};
    for (const std::string& t : texts) {
        v.text.push_back(t);
        const bool byte = t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>';
        v.type.push_back(byte ? token_type::byte : token_type::normal);
    }
    return tokenizer::from_vocab(std::move(v));
}

} // namespace pi::test
