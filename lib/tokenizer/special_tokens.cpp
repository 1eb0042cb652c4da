// Cutting a text at the texts of special tokens, for encode's parse_special (docs/tokenizer.md):
// each special token in turn, longest first, splits every plain fragment left by the ones before
// it, so a longer token is never cut by a shorter one it contains.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_impl.hpp"

namespace pi {

std::vector<text_fragment> split_at_special_tokens(const vocab_tables& t, std::string_view text) {
    std::vector<text_fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({-1, text});
    std::vector<text_fragment> next;
    for (const int32_t id : t.special_by_length) {
        const std::string_view special = t.v.text[id];
        // Most special tokens are in no fragment: the list is rebuilt only from the first
        // fragment that holds this one.
        bool found = false;
        for (size_t k = 0; k < fragments.size(); ++k) {
            const text_fragment& f = fragments[k];
            size_t at = f.token >= 0 ? std::string_view::npos : f.text.find(special);
            if (at == std::string_view::npos) {
                if (found) next.push_back(f);
                continue;
            }
            if (!found) {
                next.assign(fragments.begin(), fragments.begin() + static_cast<ptrdiff_t>(k));
                found = true;
            }
            std::string_view rest = f.text;
            for (; at != std::string_view::npos; at = rest.find(special)) {
                if (at > 0) next.push_back({-1, rest.substr(0, at)});
                next.push_back({id, rest.substr(at, special.size())});
                rest.remove_prefix(at + special.size());
            }
            if (!rest.empty()) next.push_back({-1, rest});
        }
        if (found) fragments.swap(next);
    }
    return fragments;
}

} // namespace pi
