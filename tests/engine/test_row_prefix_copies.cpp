// The copies of a batch's neuron lists: used row prefixes merged across short gaps.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "engine/row_prefix_copies.hpp"

using namespace pi;

namespace {

using copies = std::vector<std::pair<size_t, size_t>>; // (offset, bytes)

copies plan(const std::vector<int32_t>& counts, size_t stride, size_t max_gap) {
    copies out;
    for_each_row_prefix_copy(counts, 4, stride, max_gap,
                             [&](size_t at, size_t bytes) { out.emplace_back(at, bytes); });
    return out;
}

} // namespace

TEST_CASE("one token's list is one copy of its used bytes") {
    CHECK(plan({3}, 400, 0) == copies{{0, 12}});
    CHECK(plan({3}, 400, row_prefix_max_gap) == copies{{0, 12}});
}

TEST_CASE("a batch's lists merge into one copy when every gap is short enough") {
    // rows of 100 ints: tokens use 3, 50 and 7; gaps 388 and 200 bytes.
    CHECK(plan({3, 50, 7}, 400, 388) == copies{{0, 800 + 28}});
    CHECK(plan({3, 50, 7}, 400, row_prefix_max_gap) == copies{{0, 828}});
}

TEST_CASE("a gap longer than the limit starts a new copy") {
    CHECK(plan({3, 50, 7}, 400, 387) == copies{{0, 12}, {400, 428}});
    CHECK(plan({3, 50, 7}, 400, 199) == copies{{0, 12}, {400, 200}, {800, 28}});
    CHECK(plan({100, 100}, 400, 0) == copies{{0, 800}}); // full rows leave no gap
}

TEST_CASE("tokens with empty lists are skipped, or spanned by a run") {
    CHECK(plan({0, 0}, 400, row_prefix_max_gap).empty());
    CHECK(plan({}, 400, row_prefix_max_gap).empty());
    CHECK(plan({0, 2, 0, 0, 1}, 400, row_prefix_max_gap) == copies{{400, 1200 + 4}});
    CHECK(plan({0, 2, 0, 0, 1}, 400, 1000) == copies{{400, 8}, {1600, 4}});
    CHECK(plan({-1, 2}, 400, 0) == copies{{400, 8}}); // a negative count is nothing to copy
}
