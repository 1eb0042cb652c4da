#include <doctest/doctest.h>

#include "candidate_helpers.hpp"
#include "sampling/truncation.hpp"

using namespace pi;
using pi::test::kept_ids;
using pi::test::kept_probs;
using pi::test::kept_set;
using pi::test::list_from_probs;
using ids = std::vector<int32_t>;

namespace {
// Probabilities 0.4, 0.3, 0.15, 0.1, 0.05 given out of order, so stages must sort.
const std::vector<double> probs = {0.15, 0.4, 0.05, 0.3, 0.1};

void check_renormalised(const candidate_list& list, const std::map<int32_t, double>& expected) {
    const auto got = kept_probs(list);
    REQUIRE(got.size() == expected.size());
    for (const auto& [id, p] : expected)
        CHECK(std::abs(got.at(id) - p) < 1e-6);
}
} // namespace

TEST_CASE("top-k keeps the k most likely tokens, renormalised") {
    auto list = list_from_probs(probs);
    top_k(list, 2, 0);
    CHECK(kept_ids(list) == ids{1, 3});
    check_renormalised(list, {{1, 0.4 / 0.7}, {3, 0.3 / 0.7}});
}

TEST_CASE("top-k of 0 or more than the vocabulary keeps everything; min_keep raises k") {
    auto all = list_from_probs(probs);
    top_k(all, 0, 0);
    CHECK(all.tokens.size() == 5);
    top_k(all, 9, 0);
    CHECK(all.tokens.size() == 5);
    auto raised = list_from_probs(probs);
    top_k(raised, 1, 3);
    CHECK(kept_ids(raised) == ids{1, 3, 0});
}

TEST_CASE("top-p keeps the head whose cumulative probability reaches p") {
    auto list = list_from_probs(probs);
    top_p(list, 0.75f, 0);
    CHECK(kept_ids(list) == ids{1, 3, 0});
    check_renormalised(list, {{1, 0.4 / 0.85}, {3, 0.3 / 0.85}, {0, 0.15 / 0.85}});

    auto tiny = list_from_probs(probs);
    top_p(tiny, 0.01f, 0);
    CHECK(kept_ids(tiny) == ids{1});
    auto kept = list_from_probs(probs);
    top_p(kept, 0.01f, 4);
    CHECK(kept_ids(kept) == ids{1, 3, 0, 4});
    auto off = list_from_probs(probs);
    top_p(off, 1.0f, 0);
    CHECK(off.tokens.size() == 5);
}

TEST_CASE("top-p over a long flat tail sorts as far as it needs, equal logits by id") {
    auto list = list_from_probs(std::vector<double>(300, 1.0 / 300));
    top_p(list, 0.499f, 0); // 149.7 tokens' worth: the 150th reaches it
    REQUIRE(list.tokens.size() == 150);
    for (int32_t i = 0; i < 150; ++i)
        CHECK(list.tokens[static_cast<size_t>(i)].id == i);
}

TEST_CASE("min-p keeps the tokens at least p times as likely as the best") {
    auto list = list_from_probs(probs);
    min_p(list, 0.3f, 0); // threshold 0.12
    CHECK(kept_set(list) == ids{0, 1, 3});
    check_renormalised(list, {{1, 0.4 / 0.85}, {3, 0.3 / 0.85}, {0, 0.15 / 0.85}});

    auto strict = list_from_probs(probs);
    min_p(strict, 1.0f, 2); // only 0.4 passes; min_keep 2 adds the next best
    CHECK(kept_set(strict) == ids{1, 3});
    auto sorted = list_from_probs(probs);
    sort_by_logit(sorted);
    min_p(sorted, 0.3f, 0);
    CHECK(kept_ids(sorted) == ids{1, 3, 0});
    auto off = list_from_probs(probs);
    min_p(off, 0.0f, 0);
    CHECK(off.tokens.size() == 5);
}

TEST_CASE("typical keeps the tokens whose surprise is closest to the entropy") {
    // Entropy 1.392 nats; |-log p - H|: 0.3 -> 0.19, 0.4 -> 0.48, 0.15 -> 0.50, 0.1 -> 0.91.
    auto list = list_from_probs(probs);
    typical(list, 0.5f, 0);
    CHECK(kept_ids(list) == ids{3, 1});
    check_renormalised(list, {{3, 0.3 / 0.7}, {1, 0.4 / 0.7}});

    auto wider = list_from_probs(probs);
    typical(wider, 0.75f, 0);
    CHECK(kept_ids(wider) == ids{3, 1, 0});
    auto kept = list_from_probs(probs);
    typical(kept, 0.1f, 3);
    CHECK(kept_ids(kept) == ids{3, 1, 0});
    auto off = list_from_probs(probs);
    typical(off, 1.0f, 0);
    CHECK(off.tokens.size() == 5);
}
