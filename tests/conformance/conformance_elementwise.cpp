// Row gathers and scatters, element-wise ops, RMSNorm and RoPE on odd sizes.
#include "conformance.hpp"

using namespace pi::conformance;

TEST_CASE("get_rows gathers F32, F16, Q4_0 and Q8_0 rows as F32, repeated ids included") {
    // Quantized rows: one block, and several blocks with a padding block between rows.
    const std::pair<uint32_t, std::vector<int64_t>> widths[] = {
        {F32, {67, 256}}, {F16, {67, 256}}, {Q4_0, {32, 288}}, {Q8_0, {32, 288}}};
    for (const auto& [type, ne0s] : widths) {
        for (int64_t ne0 : ne0s) {
            bench b;
            const std::size_t pad = type == F32 || type == F16 ? 3 : 1;
            const twin table = b.typed(type, ne0, 13, random_floats(ne0 * 13, 20), pad);
            const std::vector<int32_t> ids = {12, 0, 5, 5, 7};
            const twin id = b.i32(5, 1, ids);
            const twin out = b.f32(ne0, 5, random_floats(ne0 * 5, 21), 1);
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.get_rows(ctx, &table.at[s], &id.at[s], &out.at[s]);
            });
            b.expect_close(out, exact,
                           "get_rows " + type_name(type) + " ne0=" + std::to_string(ne0));
        }
    }
}

TEST_CASE("set_rows stores F32 rows into F32 and F16 tables, the last of repeated rows winning") {
    for (uint32_t type : {F32, F16}) {
        bench b;
        const int64_t ne0 = 67;
        const twin src = b.f32(ne0, 4, random_floats(ne0 * 4, 22, -70000.0f, 70000.0f));
        const std::vector<int32_t> rows = {8, 2, 5, 2};
        const twin row = b.i32(4, 1, rows);
        const twin dst = b.typed(type, ne0, 9, random_floats(ne0 * 9, 23), 2);
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.set_rows(ctx, &src.at[s], &row.at[s], &dst.at[s]);
        });
        b.expect_close(dst, exact, type == F16 ? "set_rows into F16" : "set_rows into F32");
    }
}

TEST_CASE("add, relu and every glu kind match the reference, also in place") {
    const int64_t ne0 = 67, ne1 = 5;
    const std::vector<float> va = random_floats(ne0 * ne1, 24, -3.0f, 3.0f);
    const std::vector<float> vb = random_floats(ne0 * ne1, 25, -3.0f, 3.0f);
    for (bool in_place : {false, true}) {
        bench b;
        const twin a = b.f32(ne0, ne1, va, 1);
        const twin c = b.f32(ne0, ne1, vb, 2);
        const twin out = in_place ? a : b.f32(ne0, ne1, vb);
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.add(ctx, &a.at[s], &c.at[s], &out.at[s]);
        });
        b.expect_close(out, exact, in_place ? "add in place" : "add");
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.relu(ctx, &out.at[s], &out.at[s]);
        });
        b.expect_close(out, exact, "relu");
    }
    const std::pair<int32_t, double> kinds[] = {
        {PIB_GLU_RELU, exact}, {PIB_GLU_SILU, tol_pointwise}, {PIB_GLU_RELU_RELU, exact}};
    for (const auto& [kind, tol] : kinds) {
        bench b;
        const twin gate = b.f32(ne0, ne1, va);
        const twin up = b.f32(ne0, ne1, vb, 3);
        const twin out = b.f32(ne0, ne1, va, 1);
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.glu(ctx, &gate.at[s], &up.at[s], kind, &out.at[s]);
        });
        b.expect_close(out, tol, "glu kind " + std::to_string(kind));
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.glu(ctx, &gate.at[s], &up.at[s], kind, &gate.at[s]);
        });
        b.expect_close(gate, tol, "glu in place, kind " + std::to_string(kind));
    }
}

TEST_CASE("rms_norm matches the reference for short and long rows, also in place") {
    for (int64_t ne0 : {67, 4099}) {
        for (bool in_place : {false, true}) {
            bench b;
            const int64_t ne1 = 3;
            const twin x = b.f32(ne0, ne1, random_floats(ne0 * ne1, 26, -4.0f, 4.0f), 1);
            const twin w = b.f32(ne0, 1, random_floats(ne0, 27, 0.5f, 1.5f));
            const twin y = in_place ? x : b.f32(ne0, ne1, random_floats(ne0 * ne1, 28));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.rms_norm(ctx, &x.at[s], &w.at[s], 1e-5f, &y.at[s]);
            });
            b.expect_close(y, tol_pointwise, "rms_norm ne0=" + std::to_string(ne0));
        }
    }
}

TEST_CASE("rope rotates NORMAL and NEOX pairs, fully and partially, at large positions") {
    struct rope_case {
        int32_t n_head, head_dim, n_rot, mode;
    };
    const rope_case cases[] = {{3, 10, 10, PIB_ROPE_NORMAL},
                               {3, 10, 6, PIB_ROPE_NORMAL},
                               {5, 64, 64, PIB_ROPE_NEOX},
                               {2, 18, 8, PIB_ROPE_NEOX}};
    const std::vector<int32_t> positions = {0, 1, 17, 4095, 32767};
    for (const rope_case& c : cases) {
        bench b;
        const int64_t ne0 = static_cast<int64_t>(c.n_head) * c.head_dim;
        const int64_t n_tok = static_cast<int64_t>(positions.size());
        const twin x = b.f32(ne0, n_tok, random_floats(ne0 * n_tok, 29), 2);
        const twin pos = b.i32(n_tok, 1, positions);
        const pib_rope_params p{c.n_head, c.head_dim, c.n_rot, c.mode, 10000.0f, 1.0f};
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.rope(ctx, &x.at[s], &pos.at[s], &p);
        });
        b.expect_close(x, tol_pointwise,
                       "rope head_dim=" + std::to_string(c.head_dim) +
                           " n_rot=" + std::to_string(c.n_rot) + " mode=" + std::to_string(c.mode));
    }
}

TEST_CASE("layer_norm matches the reference with and without a bias, also in place") {
    for (int64_t ne0 : {67, 4099}) {
        for (bool with_bias : {false, true}) {
            bench b;
            const int64_t ne1 = 3;
            const twin x = b.f32(ne0, ne1, random_floats(ne0 * ne1, 29, -2.0f, 6.0f), 1);
            const twin w = b.f32(ne0, 1, random_floats(ne0, 30, 0.5f, 1.5f));
            const twin bias = b.f32(ne0, 1, random_floats(ne0, 31));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.layer_norm(ctx, &x.at[s], &w.at[s], with_bias ? &bias.at[s] : nullptr,
                                     1e-5f, &x.at[s]);
            });
            b.expect_close(x, 1e-5, "layer_norm ne0=" + std::to_string(ne0));
        }
    }
}

TEST_CASE("add_row adds a bias to every row and to listed entries only") {
    bench b;
    const int64_t ne0 = 300, ne1 = 3;
    const twin x = b.f32(ne0, ne1, random_floats(ne0 * ne1, 32));
    const twin bias = b.f32(ne0, 1, random_floats(ne0, 33));
    b.run([&](const pib_vtable& vt, void* ctx, int s) {
        return vt.add_row(ctx, &x.at[s], &bias.at[s], nullptr, nullptr);
    });
    b.expect_close(x, exact, "add_row over whole rows");
    const std::vector<int32_t> idx = {0, 7, 299, -1, 5, -1, -1, -1, 1, 2, 3, 4};
    const std::vector<int32_t> count = {3, 1, 4};
    const twin ti = b.i32(4, ne1, idx);
    const twin tc = b.i32(ne1, 1, count);
    b.run([&](const pib_vtable& vt, void* ctx, int s) {
        return vt.add_row(ctx, &x.at[s], &bias.at[s], &ti.at[s], &tc.at[s]);
    });
    b.expect_close(x, exact, "add_row over listed entries");
}
