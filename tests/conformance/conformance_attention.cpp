// Causal attention over a KV cache with holes, grouped KV heads and both cache types.
#include "conformance.hpp"

using namespace pi::conformance;

TEST_CASE("attention matches the reference for F32 and F16 caches, grouped heads and holes") {
    struct attention_case {
        int32_t n_head, n_head_kv, head_dim, n_kv;
        int64_t n_tok;
    };
    // head_dim below, at and above one 32-lane group; one and several query tokens.
    const attention_case cases[] = {
        {6, 2, 40, 37, 3}, {4, 4, 128, 70, 1}, {8, 1, 24, 5, 2}, {2, 2, 256, 130, 4}};
    for (uint32_t k_type : {F32, F16}) {
        for (uint32_t v_type : {F32, F16}) {
            for (const attention_case& c : cases) {
                bench b;
                const int64_t q_width = static_cast<int64_t>(c.n_head) * c.head_dim;
                const int64_t kv_width = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
                const int64_t cache_rows = c.n_kv + 3; // rows past n_kv are never read
                const twin q = b.f32(q_width, c.n_tok, random_floats(q_width * c.n_tok, 40), 1);
                const twin k = b.typed(k_type, kv_width, cache_rows,
                                       random_floats(kv_width * cache_rows, 41, -2.0f, 2.0f), 2);
                const twin v =
                    b.typed(v_type, kv_width, cache_rows, random_floats(kv_width * cache_rows, 42));
                // Positions in cache order with two empty rows; the last query sees every row,
                // the first sees none.
                std::vector<int32_t> kv_pos(static_cast<std::size_t>(cache_rows));
                for (int64_t j = 0; j < cache_rows; ++j)
                    kv_pos[j] = static_cast<int32_t>(j);
                kv_pos[1] = -1;
                kv_pos[c.n_kv / 2] = -1;
                std::vector<int32_t> q_pos(static_cast<std::size_t>(c.n_tok));
                for (int64_t t = 0; t < c.n_tok; ++t)
                    q_pos[t] = static_cast<int32_t>(c.n_kv - 1 - (c.n_tok - 1 - t) * 2);
                q_pos[0] = -1;
                if (c.n_tok == 1) q_pos[0] = c.n_kv - 1;
                const twin qp = b.i32(c.n_tok, 1, q_pos);
                const twin kp = b.i32(cache_rows, 1, kv_pos);
                const twin out = b.f32(q_width, c.n_tok, random_floats(q_width * c.n_tok, 43));
                const pib_attention_params p{c.n_head, c.n_head_kv, c.head_dim, c.n_kv, 0.125f};
                b.run([&](const pib_vtable& vt, void* ctx, int s) {
                    return vt.attention(ctx, &q.at[s], &k.at[s], &v.at[s], &qp.at[s], &kp.at[s], &p,
                                        &out.at[s]);
                });
                b.expect_close(out, tol_reduction,
                               "attention head_dim=" + std::to_string(c.head_dim) + " n_kv=" +
                                   std::to_string(c.n_kv) + (k_type == F16 ? " K F16" : " K F32") +
                                   (v_type == F16 ? " V F16" : " V F32"));
            }
        }
    }
}
