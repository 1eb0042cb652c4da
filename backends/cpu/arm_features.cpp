#include "arm_features.hpp"

namespace pi::cpu {

// Asked once: kernel dispatch consults it on every product, and the answer cannot change.
const arm_cpu& arm_features() noexcept {
    static const arm_cpu features = platform::arm_cpu_extensions();
    return features;
}

} // namespace pi::cpu
