#include <doctest/doctest.h>

#include "candidate_helpers.hpp"
#include "sampling/dry.hpp"
#include "sampling/penalties.hpp"

using namespace pi;

namespace {
candidate_list from_logits(const std::vector<float>& logits) {
    candidate_list list;
    fill_candidates(list, logits);
    return list;
}

token_history history_of(const std::vector<int32_t>& tokens, size_t capacity = 64) {
    token_history h(capacity);
    for (int32_t t : tokens)
        h.push(t);
    return h;
}

float logit_of(const candidate_list& list, int32_t id) {
    for (const token_candidate& c : list.tokens)
        if (c.id == id) return c.logit;
    FAIL("token ", id, " is not a candidate");
    return 0.0f;
}
} // namespace

TEST_CASE("the history ring keeps the newest tokens in order") {
    token_history h(3);
    for (int32_t t : {1, 2, 3, 4, 5})
        h.push(t);
    CHECK(h.tokens() == std::vector<int32_t>{3, 4, 5});
    CHECK(h.from_end(0) == 5);
    token_history all(token_history::unbounded);
    for (int32_t t : {1, 2, 3, 4, 5})
        all.push(t);
    CHECK(all.size() == 5);
    h.clear();
    CHECK(h.size() == 0);
}

TEST_CASE("repetition, frequency and presence penalties on a known history") {
    const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
    const token_history history = history_of({0, 0, 1, 3});
    repetition_penalties all({64, 2.0f, 0.5f, 0.25f});
    auto list = from_logits(logits);
    all.apply(list, history);
    CHECK(logit_of(list, 0) == doctest::Approx(2.0 / 2 - 2 * 0.5 - 0.25)); // positive: divided
    CHECK(logit_of(list, 1) == doctest::Approx(-1.0 * 2 - 0.5 - 0.25));    // negative: multiplied
    CHECK(logit_of(list, 2) == 0.5f);                                      // never seen
    CHECK(logit_of(list, 3) == doctest::Approx(1.0 / 2 - 0.5 - 0.25));

    // Only the last two tokens (1, 3) count.
    repetition_penalties recent({2, 2.0f, 0.5f, 0.25f});
    auto list2 = from_logits(logits);
    recent.apply(list2, history);
    CHECK(logit_of(list2, 0) == 2.0f);
    CHECK(logit_of(list2, 1) == doctest::Approx(-2.75));

    repetition_penalties off({0, 2.0f, 0.5f, 0.25f});
    auto list3 = from_logits(logits);
    off.apply(list3, history);
    CHECK(logit_of(list3, 0) == 2.0f);
}

TEST_CASE("DRY penalises the token that would extend a repetition") {
    // a b c d x a b c: "a b c" (length 3) repeats; d followed it, so d is penalised by
    // multiplier * base^(3 - allowed_length) = 1 * 2^1.
    const dry_options o{1.0f, 2.0f, 2, -1};
    dry_penalty dry(o, {}, {});
    const std::vector<float> logits(6, 0.0f);
    auto list = from_logits(logits);
    dry.apply(list, history_of({0, 1, 2, 3, 4, 0, 1, 2}));
    CHECK(logit_of(list, 3) == doctest::Approx(-2.0));
    for (int32_t id : {0, 1, 2, 4, 5})
        CHECK(logit_of(list, id) == 0.0f);

    // a a a a: every earlier run of a's is followed by a; the longest has length 3.
    auto run = from_logits(logits);
    dry.apply(run, history_of({0, 0, 0, 0}));
    CHECK(logit_of(run, 0) == doctest::Approx(-2.0));

    // A repetition of length 2 = allowed_length already counts (2^0); one of 1 does not.
    auto short_one = from_logits(logits);
    dry.apply(short_one, history_of({0, 1, 5, 0, 1}));
    CHECK(logit_of(short_one, 5) == doctest::Approx(-1.0));
    auto too_short = from_logits(logits);
    dry.apply(too_short, history_of({0, 5, 3, 0}));
    CHECK(logit_of(too_short, 5) == 0.0f);

    // last_n = 4 hides the first occurrence.
    dry_penalty recent({1.0f, 2.0f, 2, 4}, {}, {});
    auto hidden = from_logits(logits);
    recent.apply(hidden, history_of({0, 1, 2, 3, 4, 0, 1, 2}));
    CHECK(logit_of(hidden, 3) == 0.0f);
}

TEST_CASE("a DRY repetition does not reach back over a sequence breaker") {
    // Token texts: 0 "a", 1 "b", 2 "c", 3 "d", 4 ":", 5 "x:" (contains the breaker), 6 "e", 7 "f".
    const std::vector<std::string> pieces = {"a", "b", "c", "d", ":", "x:", "e", "f"};
    const dry_options o{1.0f, 2.0f, 2, -1};
    const std::vector<float> logits(8, 0.0f);
    const std::vector<int32_t> history = {4, 0, 1, 2, 3, 4, 0, 1, 2};

    // Without breakers ": a b c" repeats (length 4): d gets 2^(4-2).
    dry_penalty plain(o, {}, pieces);
    auto list = from_logits(logits);
    plain.apply(list, history_of(history));
    CHECK(logit_of(list, 3) == doctest::Approx(-4.0));

    // With ":" a breaker only "a b c" after it counts: 2^(3-2).
    dry_penalty broken(o, {":"}, pieces);
    auto cut = from_logits(logits);
    broken.apply(cut, history_of(history));
    CHECK(logit_of(cut, 3) == doctest::Approx(-2.0));

    // A token whose text merely contains the breaker breaks too.
    auto inside = from_logits(logits);
    broken.apply(inside, history_of({5, 0, 1, 2, 3, 5, 0, 1, 2}));
    CHECK(logit_of(inside, 3) == doctest::Approx(-2.0));

    // A breaker spelled across two tokens ("ef") cuts after the later of them. In
    // a b e f c d a b e f c the repetition "a b e f c" (5) would cost d 2^3; after the last "ef"
    // only "c" is left, shorter than allowed_length, so nothing is penalised.
    const std::vector<int32_t> spelled = {0, 1, 6, 7, 2, 3, 0, 1, 6, 7, 2};
    auto whole = from_logits(logits);
    plain.apply(whole, history_of(spelled));
    CHECK(logit_of(whole, 3) == doctest::Approx(-8.0));
    dry_penalty across(o, {"ef"}, pieces);
    auto split = from_logits(logits);
    across.apply(split, history_of(spelled));
    for (int32_t id = 0; id < 8; ++id)
        CHECK(logit_of(split, id) == 0.0f);
}
