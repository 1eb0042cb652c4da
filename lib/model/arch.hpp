#pragma once
// Architecture registry: what differs between the model families this engine runs.
#include <string_view>

#include "pib_backend.h"

namespace pi {

struct arch_desc {
    std::string_view name;
    pib_glu_kind sparse_glu;       // FFN activation of sparse (PowerInfer) files
    pib_glu_kind dense_default_glu;// FFN activation of dense files without our relu marker
    pib_rope_mode rope_mode;
};

// nullptr for an architecture this build cannot run.
const arch_desc* find_arch(std::string_view name) noexcept;

// Comma-separated names, for error messages.
const char* supported_arch_names() noexcept;

} // namespace pi
