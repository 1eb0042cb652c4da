#include "sampling/logit_bias.hpp"

#include "support/error.hpp"

namespace pi {

void apply_logit_bias(candidate_list& list, std::span<const logit_bias> biases) {
    for (const logit_bias& b : biases) {
        if (b.token < 0 || static_cast<size_t>(b.token) >= list.tokens.size())
            fail(status::invalid_argument, "logit bias token ", b.token,
                 " is outside the vocabulary of ", list.tokens.size());
        list.tokens[static_cast<size_t>(b.token)].logit += b.bias;
    }
}

} // namespace pi
