/* Bounds of a pib_tensor view, shared by every backend: the one overflow-checked answer to
 * "does this view lie inside its buffer?". */
#ifndef PIB_TENSOR_EXTENT_H
#define PIB_TENSOR_EXTENT_H

#include <stddef.h>
#include <stdint.h>

#include "pib_backend.h"

/* *out = a * b; 0 on overflow. */
static inline int pib_mul_fits(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* 1 when the view's rows (row_bytes each, nb1 apart, from offset) lie inside buffer_size bytes
 * and rows do not overlap; 0 otherwise, overflow included. ne1 must be >= 0. */
static inline int pib_view_fits(const pib_tensor *t, size_t row_bytes, size_t buffer_size) {
    if (t->ne1 > 1 && t->nb1 < row_bytes) return 0;
    size_t end = t->offset;
    if (t->ne1 > 0) {
        size_t span = 0;
        if (!pib_mul_fits((size_t)(t->ne1 - 1), t->nb1, &span)) return 0;
        if (span > SIZE_MAX - end) return 0;
        end += span;
        if (row_bytes > SIZE_MAX - end) return 0;
        end += row_bytes;
    }
    return end <= buffer_size;
}

/* 1 when two F32 views (ne1 rows of ne0 floats, nb1 bytes apart, from base) share a byte,
 * compared as addresses: they may lie in different buffers. */
static inline int pib_f32_views_overlap(const void *a_base, int64_t a_ne0, int64_t a_ne1,
                                        size_t a_nb1, const void *b_base, int64_t b_ne0,
                                        int64_t b_ne1, size_t b_nb1) {
    if (a_ne0 <= 0 || a_ne1 <= 0 || b_ne0 <= 0 || b_ne1 <= 0) return 0;
    const uintptr_t a_begin = (uintptr_t)a_base, b_begin = (uintptr_t)b_base;
    const uintptr_t a_end = a_begin + (uintptr_t)(a_ne1 - 1) * a_nb1 + (uintptr_t)a_ne0 * 4u;
    const uintptr_t b_end = b_begin + (uintptr_t)(b_ne1 - 1) * b_nb1 + (uintptr_t)b_ne0 * 4u;
    return a_begin < b_end && b_begin < a_end;
}

#endif /* PIB_TENSOR_EXTENT_H */
