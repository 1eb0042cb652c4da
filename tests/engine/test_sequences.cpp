#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/context.hpp"
#include "model/model.hpp"
#include "support/byte_stream.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

std::string sequences_model(const std::string& name = "sequences.gguf", uint64_t seed = 0) {
    static const std::string dir = test::scratch_dir("sequences");
    synth_options o = test::tiny_model_options(true);
    if (seed != 0) o.seed = seed;
    return test::write_tiny_model(dir, name, o);
}

const model& shared_model() {
    static const auto m = model::load(sequences_model(), load_options{});
    return *m;
}

// Two token streams of the fixture's vocabulary.
const std::vector<int32_t> first = {1, 1064, 261, 2096, 395, 3588, 261, 740};
const std::vector<int32_t> second = {1, 395, 740, 1064, 2096, 261};

context_options options(int32_t n_seq, int32_t n_ctx = 64) {
    context_options o;
    o.n_ctx = n_ctx;
    o.n_seq_max = n_seq;
    o.kv_f16 = false;
    return o;
}

std::vector<float> copy_of(std::span<const float> l) {
    return {l.begin(), l.end()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float d = 0.0f;
    for (size_t i = 0; i < a.size(); ++i)
        d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
}

float max_abs(const std::vector<float>& v) {
    float m = 0.0f;
    for (float x : v)
        m = std::max(m, std::fabs(x));
    return m;
}

std::vector<float> alone(const std::vector<int32_t>& tokens) {
    context ctx(shared_model(), options(1));
    ctx.decode(batch_view{tokens, {}, {}});
    return copy_of(ctx.logits(-1));
}

int32_t argmax(std::span<const float> l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

void decode_in(context& ctx, const std::vector<int32_t>& tokens, int32_t seq) {
    const std::vector<int32_t> seqs(tokens.size(), seq);
    batch_view b;
    b.tokens = tokens;
    b.seqs = seqs;
    ctx.decode(b);
}

} // namespace

TEST_CASE("two sequences in one batch give the logits each gives alone") {
    context ctx(shared_model(), options(2));
    std::vector<int32_t> tokens, seqs;
    // Interleaved, so that each sequence's cells are not contiguous.
    for (size_t i = 0; i < std::max(first.size(), second.size()); ++i) {
        if (i < first.size()) {
            tokens.push_back(first[i]);
            seqs.push_back(0);
        }
        if (i < second.size()) {
            tokens.push_back(second[i]);
            seqs.push_back(1);
        }
    }
    batch_view b;
    b.tokens = tokens;
    b.seqs = seqs;
    b.last_of_each_sequence = true;
    ctx.decode(b);
    const auto last_of = [&](int32_t seq) {
        return static_cast<size_t>(std::find(seqs.rbegin(), seqs.rend(), seq).base() -
                                   seqs.begin() - 1);
    };
    const size_t last_first = last_of(0), last_second = last_of(1);
    REQUIRE(seqs[last_first] == 0);
    REQUIRE(seqs[last_second] == 1);
    const std::vector<float> a = copy_of(ctx.logits(static_cast<int32_t>(last_first)));
    const std::vector<float> c = copy_of(ctx.logits(static_cast<int32_t>(last_second)));
    const std::vector<float> ea = alone(first), ec = alone(second);
    CHECK(max_abs_diff(a, ea) <= 1e-5f * max_abs(ea));
    CHECK(max_abs_diff(c, ec) <= 1e-5f * max_abs(ec));
    CHECK(ctx.cache().pos_max(0) == static_cast<int32_t>(first.size()) - 1);
    CHECK(ctx.cache().pos_max(1) == static_cast<int32_t>(second.size()) - 1);
    CHECK(ctx.cache().used_cells() == static_cast<int32_t>(tokens.size()));
}

TEST_CASE("four sequences decoded a token each per step pick what each picks alone") {
    const std::vector<std::vector<int32_t>> prompts = {first, second, {1, 740, 395}, {1, 261}};
    std::vector<std::vector<int32_t>> expected;
    for (const auto& p : prompts) {
        context one(shared_model(), options(1));
        one.decode(batch_view{p, {}, {}});
        std::vector<int32_t> out;
        for (int i = 0; i < 6; ++i) {
            out.push_back(argmax(one.logits(-1)));
            const int32_t t[1] = {out.back()};
            one.decode(batch_view{t, {}, {}});
        }
        expected.push_back(out);
    }
    // Each prompt but its last token alone, then one batch a step: a token of each sequence.
    context ctx(shared_model(), options(4));
    std::vector<int32_t> next(4);
    const std::vector<int32_t> seqs = {0, 1, 2, 3};
    for (size_t s = 0; s < 4; ++s) {
        decode_in(ctx, {prompts[s].begin(), prompts[s].end() - 1}, static_cast<int32_t>(s));
        next[s] = prompts[s].back();
    }
    std::vector<std::vector<int32_t>> got(4);
    for (int step = 0; step < 7; ++step) {
        batch_view b;
        b.tokens = next;
        b.seqs = seqs;
        b.last_of_each_sequence = true;
        ctx.decode(b);
        if (step == 6) break;
        for (size_t s = 0; s < 4; ++s) {
            next[s] = argmax(ctx.logits(static_cast<int32_t>(s)));
            got[s].push_back(next[s]);
        }
    }
    CHECK(got == expected);
}

TEST_CASE("a copied prefix is shared, not recomputed, and continues like the original") {
    context ctx(shared_model(), options(2));
    const std::vector<int32_t> prefix(first.begin(), first.begin() + 5);
    decode_in(ctx, prefix, 0);
    ctx.cache().copy(0, 1, 0, -1);
    CHECK(ctx.cache().used_cells() == 5);
    CHECK(ctx.cache().pos_max(1) == 4);
    const std::vector<int32_t> rest(first.begin() + 5, first.end());
    decode_in(ctx, rest, 1);
    const std::vector<float> got = copy_of(ctx.logits(-1)), want = alone(first);
    CHECK(max_abs_diff(got, want) <= 1e-5f * max_abs(want));
    CHECK(ctx.cache().leading_tokens(1) == first);
    CHECK(ctx.cache().leading_tokens(0) == prefix);
}

TEST_CASE("remove, keep and the position queries edit one sequence") {
    context ctx(shared_model(), options(3));
    decode_in(ctx, first, 0);
    decode_in(ctx, second, 1);
    ctx.cache().copy(0, 2, 0, 3);
    CHECK(ctx.cache().pos_min(2) == 0);
    CHECK(ctx.cache().pos_max(2) == 2);
    ctx.cache().remove(0, 4, -1);
    CHECK(ctx.cache().pos_max(0) == 3);
    CHECK(ctx.cache().pos_max(2) == 2);
    ctx.cache().keep(1);
    CHECK(ctx.cache().pos_max(0) == -1);
    CHECK(ctx.cache().pos_max(2) == -1);
    CHECK(ctx.cache().used_cells() == static_cast<int32_t>(second.size()));
    ctx.cache().remove(-1, 0, -1);
    CHECK(ctx.cache().used_cells() == 0);
    CHECK_THROWS_AS(ctx.cache().remove(3, 0, -1), error);
    CHECK_THROWS_AS(ctx.cache().copy(0, -2, 0, -1), error);
    CHECK_THROWS_AS(ctx.cache().pos_max(7), error);
}

TEST_CASE("a shift re-rotates the cached keys: positions move, attention sees the new ones") {
    // Attention depends on relative positions only: a cache decoded at 0..7 and shifted by +5
    // must continue like one decoded at 5..12 in the first place. Without the re-rotation the
    // next token would see its keys 5 positions further away.
    const int32_t delta = 5, n = static_cast<int32_t>(first.size());
    context shifted(shared_model(), options(1));
    decode_in(shifted, first, 0);
    shifted.cache().shift(0, 0, -1, delta);
    CHECK(shifted.cache().pos_min(0) == delta);
    CHECK(shifted.cache().pos_max(0) == n - 1 + delta);
    CHECK(shifted.cache().leading_tokens(0).empty()); // position 0 is no longer held

    context direct(shared_model(), options(1));
    std::vector<int32_t> pos(first.size());
    for (int32_t i = 0; i < n; ++i)
        pos[static_cast<size_t>(i)] = i + delta;
    direct.decode(batch_view{first, pos, {}});

    const int32_t next[1] = {395};
    const int32_t at[1] = {n + delta};
    shifted.decode(batch_view{next, at, {}});
    direct.decode(batch_view{next, at, {}});
    const std::vector<float> got = copy_of(shifted.logits(-1)), want = copy_of(direct.logits(-1));
    CHECK(max_abs_diff(got, want) <= 1e-4f * max_abs(want));

    // A context shift: keep BOS, drop two tokens, move the rest down.
    context ctx(shared_model(), options(1));
    decode_in(ctx, first, 0);
    ctx.cache().remove(0, 1, 3);
    ctx.cache().shift(0, 3, -1, -2);
    std::vector<int32_t> kept = {first[0]};
    kept.insert(kept.end(), first.begin() + 3, first.end());
    CHECK(ctx.cache().leading_tokens(0) == kept);
    CHECK(ctx.n_past() == n - 2);
}

TEST_CASE("shifting a shared sequence leaves the other sequence's positions alone") {
    context ctx(shared_model(), options(2));
    decode_in(ctx, first, 0);
    ctx.cache().copy(0, 1, 0, -1);
    ctx.cache().remove(1, 1, 3);
    ctx.cache().shift(1, 3, -1, -2);
    CHECK(ctx.cache().leading_tokens(0) == first);
    CHECK(ctx.cache().pos_max(1) == static_cast<int32_t>(first.size()) - 3);
    // The copies made to unshare the moved cells take free cells.
    CHECK(ctx.cache().used_cells() == static_cast<int32_t>(first.size() + first.size() - 3));
    // Sequence 0 still continues as if nothing happened to sequence 1.
    decode_in(ctx, {395}, 0);
    std::vector<float> original = copy_of(ctx.logits(-1));
    auto extended = first;
    extended.push_back(395);
    const std::vector<float> want = alone(extended);
    CHECK(max_abs_diff(original, want) <= 1e-5f * max_abs(want));
    CHECK_THROWS_AS(ctx.cache().shift(1, 0, 1, 2), error); // would collide with position 2
}

TEST_CASE("a batch that does not fit leaves the cache as it was") {
    context ctx(shared_model(), options(2, 10));
    decode_in(ctx, first, 0);
    const std::vector<float> before = copy_of(ctx.logits(-1));
    try {
        decode_in(ctx, {1, 395, 740}, 1);
        FAIL("expected context_full");
    } catch (const error& e) {
        CHECK(e.code() == status::context_full);
    }
    CHECK(ctx.cache().used_cells() == static_cast<int32_t>(first.size()));
    CHECK(ctx.cache().pos_max(1) == -1);
    CHECK(copy_of(ctx.logits(-1)) == before);
    // A bad sequence id and a repeated position are refused before anything runs.
    CHECK_THROWS_AS(decode_in(ctx, {1}, 2), error);
    const std::vector<int32_t> tokens = {1, 2}, pos = {0, 0};
    CHECK_THROWS_AS(ctx.decode(batch_view{tokens, pos, {}}), error);
}

TEST_CASE("a restored context continues bit-identically") {
    context a(shared_model(), options(2));
    decode_in(a, first, 0);
    decode_in(a, second, 1);
    std::vector<uint8_t> blob;
    byte_writer out(blob);
    a.save_state(-1, out);

    context b(shared_model(), options(2));
    byte_reader in(blob, "state");
    b.load_state(-1, in);
    CHECK(copy_of(b.logits(-1)) == copy_of(a.logits(-1)));
    for (int step = 0; step < 4; ++step) {
        const int32_t t[1] = {argmax(a.logits(-1))};
        decode_in(a, {t[0]}, 1);
        decode_in(b, {t[0]}, 1);
        CHECK(copy_of(a.logits(-1)) == copy_of(b.logits(-1)));
    }
    CHECK(b.cache().leading_tokens(0) == first);
}

TEST_CASE("one sequence's state loads into another sequence of another context") {
    context a(shared_model(), options(1));
    decode_in(a, first, 0);
    std::vector<uint8_t> blob;
    byte_writer out(blob);
    a.save_state(0, out);

    context b(shared_model(), options(3));
    byte_reader in(blob, "state");
    b.load_state(2, in);
    CHECK(b.cache().leading_tokens(2) == first);
    CHECK(b.cache().pos_max(0) == -1);
    decode_in(a, {395}, 0);
    decode_in(b, {395}, 2);
    CHECK(copy_of(a.logits(-1)) == copy_of(b.logits(-1)));
}

TEST_CASE("a bad state is refused with the reason and the context untouched") {
    context a(shared_model(), options(2));
    decode_in(a, first, 0);
    std::vector<uint8_t> blob;
    byte_writer out(blob);
    a.save_state(-1, out);

    context b(shared_model(), options(2));
    decode_in(b, second, 1);
    const std::vector<float> before = copy_of(b.logits(-1));
    const auto refused = [&](std::span<const uint8_t> data, int32_t seq, status code,
                             const char* reason) {
        byte_reader in(data, "the state");
        try {
            b.load_state(seq, in);
            FAIL("expected an error");
        } catch (const error& e) {
            CHECK(e.code() == code);
            CHECK(std::string(e.what()).find(reason) != std::string::npos);
        }
        CHECK(b.cache().leading_tokens(1) == second);
        CHECK(b.cache().pos_max(0) == -1);
        CHECK(copy_of(b.logits(-1)) == before);
    };
    for (size_t cut : {size_t{0}, size_t{5}, size_t{30}, blob.size() / 2, blob.size() - 1})
        refused(std::span<const uint8_t>(blob.data(), cut), -1, status::format, "truncated");
    std::vector<uint8_t> bad_magic = blob;
    bad_magic[0] = 'X';
    refused(bad_magic, -1, status::format, "magic");
    std::vector<uint8_t> bad_version = blob;
    bad_version[8] = 99;
    refused(bad_version, -1, status::format, "version");
    std::vector<uint8_t> longer = blob;
    longer.push_back(0);
    refused(longer, -1, status::format, "unexpected bytes");
    refused(blob, 0, status::invalid_argument, "every sequence");

    const auto other = model::load(sequences_model("other.gguf", 99), load_options{});
    context c(*other, options(2));
    byte_reader in(blob, "the state");
    try {
        c.load_state(-1, in);
        FAIL("expected format");
    } catch (const error& e) {
        CHECK(e.code() == status::format);
        CHECK(std::string(e.what()).find("another model") != std::string::npos);
    }

    context small(shared_model(), options(1));
    byte_reader in2(blob, "the state");
    CHECK_THROWS_AS(small.load_state(-1, in2), error);
    context tiny(shared_model(), options(2, 4));
    byte_reader in3(blob, "the state");
    try {
        tiny.load_state(-1, in3);
        FAIL("expected context_full");
    } catch (const error& e) {
        CHECK(e.code() == status::context_full);
    }
}
