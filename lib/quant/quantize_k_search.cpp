// The K-quant scale searches. Compiled with -ffp-contract=off: every fused multiply-add of
// ggml's build is an explicit fused_multiply_add (fused.hpp) below, and no other operation may be
// fused.
#include "quant/quantize_k_search.hpp"
#include "quant/fused.hpp"

#include <algorithm>

namespace pi::kquant {

namespace {

int clamp_int(int v, int lo, int hi) noexcept {
    return std::max(lo, std::min(hi, v));
}

// The first element of largest magnitude, sign kept; 0 when all are zero.
float signed_absmax(int n, const float* x, float& amax) noexcept {
    float max = 0.0f;
    amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

} // namespace

PI_QUANT_FMA_CLONES float fit_symmetric(int n, int nmax, const float* x, int8_t* L) noexcept {
    float amax;
    const float max = signed_absmax(n, x, amax);
    if (amax < 1e-30f) {
        std::fill(L, L + n, int8_t{0});
        return 0.0f;
    }
    const float fnmax = static_cast<float>(nmax);
    float iscale = -fnmax / max;
    float sumlx = 0.0f;
    float suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int_of_product(iscale, x[i]), -nmax, nmax - 1);
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        const float fl = static_cast<float>(l);
        sumlx = fused_multiply_add(w * x[i], fl, sumlx);
        suml2 = fused_multiply_add(w * fl, fl, suml2);
    }
    float scale = sumlx / suml2;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -fused_multiply_add(static_cast<float>(is), 0.1f, fnmax) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int_of_product(iscale, x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            const float fl = static_cast<float>(l);
            sumlx = fused_multiply_add(w * x[i], fl, sumlx);
            suml2 = fused_multiply_add(w * fl, fl, suml2);
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = clamp_int(nearest_int_of_product(iscale, x[i]), -nmax, nmax - 1);
                L[i] = static_cast<int8_t>(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

PI_QUANT_FMA_CLONES float fit_symmetric_refined(int n, int nmax, const float* x,
                                                int8_t* L) noexcept {
    float amax;
    const float max = signed_absmax(n, x, amax);
    if (amax == 0.0f) {
        std::fill(L, L + n, int8_t{0});
        return 0.0f;
    }
    const float iscale = -static_cast<float>(nmax) / max;
    float sumlx = 0.0f;
    float suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int_of_product(iscale, x[i]), -nmax, nmax - 1);
        L[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        const float fl = static_cast<float>(l);
        sumlx = fused_multiply_add(w * x[i], fl, sumlx);
        suml2 = fused_multiply_add(w * fl, fl, suml2);
    }
    // Move one code at a time to where the fit of the others puts it, while the fit improves.
    for (int round = 0; round < 5; ++round) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float wx = x[i] * w;
            const float li = static_cast<float>(L[i]);
            float slx = fused_multiply_add(-wx, li, sumlx);
            if (!(slx > 0.0f)) continue;
            float sl2 = fused_multiply_add(-(w * li), li, suml2);
            const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i]) continue;
            const float fl = static_cast<float>(new_l);
            slx = fused_multiply_add(wx, fl, slx);
            sl2 = fused_multiply_add(w * fl, fl, sl2);
            if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = static_cast<int8_t>(new_l);
                sumlx = slx;
                suml2 = sl2;
                ++n_changed;
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(L[i] + nmax);
    return sumlx / suml2;
}

PI_QUANT_FMA_CLONES float fit_scale_min(int n, int nmax, const float* x, const float* weights,
                                        uint8_t* L, float& the_min, uint8_t* Laux, float rmin,
                                        float rdelta, int nstep, bool use_mad) noexcept {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += weights[i];
        sum_x = fused_multiply_add(weights[i], x[i], sum_x);
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        std::fill(L, L + n, uint8_t{0});
        the_min = -min;
        return 0.0f;
    }
    const float fnmax = static_cast<float>(nmax);
    const auto error_of = [&](float scale, float offset, const uint8_t* codes) {
        float err = 0.0f;
        for (int i = 0; i < n; ++i) {
            float diff = fused_multiply_add(scale, static_cast<float>(codes[i]), offset) - x[i];
            diff = use_mad ? std::fabs(diff) : diff * diff;
            err = fused_multiply_add(weights[i], diff, err);
        }
        return err;
    };
    float iscale = fnmax / (max - min);
    float scale = 1.0f / iscale;
    for (int i = 0; i < n; ++i)
        L[i] = static_cast<uint8_t>(clamp_int(nearest_int_of_product(iscale, x[i] - min), 0, nmax));
    float best_error = error_of(scale, min, L);
    for (int is = 0; is <= nstep; ++is) {
        iscale = (fused_multiply_add(rdelta, static_cast<float>(is), rmin) + fnmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int_of_product(iscale, x[i] - min), 0, nmax);
            Laux[i] = static_cast<uint8_t>(l);
            const float fl = static_cast<float>(l);
            const float wl = weights[i] * fl;
            sum_l += wl;
            sum_l2 = fused_multiply_add(fl, wl, sum_l2);
            sum_xl = fused_multiply_add(x[i], wl, sum_xl);
        }
        // Least squares for scale and offset together, as ggml: D is the system's determinant.
        const float D = fused_multiply_add(sum_w, sum_l2, -(sum_l * sum_l));
        if (!(D > 0.0f)) continue;
        float this_scale = fused_multiply_add(-sum_x, sum_l, sum_xl * sum_w) / D;
        float this_min = fused_multiply_add(sum_x, sum_l2, -(sum_l * sum_xl)) / D;
        if (this_min > 0.0f) {
            this_min = 0.0f;
            this_scale = sum_xl / sum_l2;
        }
        const float err = error_of(this_scale, this_min, Laux);
        if (err < best_error) {
            std::copy(Laux, Laux + n, L);
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    the_min = -min;
    return scale;
}

} // namespace pi::kquant
