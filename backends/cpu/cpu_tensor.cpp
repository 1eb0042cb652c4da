#include "cpu_tensor.hpp"

#include "cpu_context.hpp"
#include "pib_tensor_extent.h"

#include <cstdint>

namespace pi::cpu {

int make_view(const pib_tensor* t, view& v) noexcept {
    if (t == nullptr || t->buffer == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    const type_traits tt = traits_of(t->type);
    if (tt.name == nullptr || t->ne0 < 0 || t->ne1 < 0) return PIB_ERR_INVALID_ARGUMENT;
    if (t->ne0 % tt.block_size != 0) return PIB_ERR_INVALID_ARGUMENT;

    std::size_t row = 0;
    if (!pib_mul_fits(static_cast<std::size_t>(t->ne0 / tt.block_size), tt.type_size, &row) ||
        !pib_view_fits(t, row, t->buffer->size))
        return PIB_ERR_INVALID_ARGUMENT;

    // Kernels read elements through typed pointers, so every row must be aligned for its
    // element (blocks of quantized types start with an F16 scale).
    const std::size_t align = tt.block_size == 1 ? tt.type_size : alignof(uint16_t);
    std::byte* base = t->buffer->data + t->offset;
    if (reinterpret_cast<std::uintptr_t>(base) % align != 0) return PIB_ERR_INVALID_ARGUMENT;
    if (t->ne1 > 1 && t->nb1 % align != 0) return PIB_ERR_INVALID_ARGUMENT;

    v = view{base, t->ne0, t->ne1, t->nb1, t->type};
    return PIB_OK;
}

int make_views(std::initializer_list<std::pair<const pib_tensor*, view*>> list) noexcept {
    for (const auto& [t, v] : list)
        if (const int s = make_view(t, *v); s != PIB_OK) return s;
    return PIB_OK;
}

} // namespace pi::cpu
