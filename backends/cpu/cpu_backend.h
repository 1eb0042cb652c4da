/* The built-in CPU backend. A second instance with its own memory capacity can act as a
 * "device" so that the hybrid path is testable without a GPU. */
#ifndef PIB_CPU_BACKEND_H
#define PIB_CPU_BACKEND_H

#include "pib_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels an instance runs. SCALAR are the reference kernels (double sums), the oracle of
 * every other level and backend; AVX2 (with FMA and F16C) and AVX512 (F, BW, VL) on x86-64, NEON,
 * NEON_DOTPROD (with the dot-product extension) and NEON_FP16 (NEON_DOTPROD plus FP16
 * arithmetic: F16 weights times activations rounded to F16, products accumulated in F32) on
 * AArch64 are the fast kernels (float FMA sums), chosen at run time. AUTO picks the best level
 * the CPU supports; the environment variable
 * POWERINFER_CPU_KERNELS=scalar|avx2|avx512|neon|neon_dotprod|neon_fp16 lowers that choice for
 * debugging or precision. device_info's name reports the level, e.g. "cpu (avx512)". */
typedef enum pib_cpu_kernels {
    PIB_CPU_KERNELS_AUTO = 0,
    PIB_CPU_KERNELS_SCALAR = 1,
    PIB_CPU_KERNELS_AVX2 = 2,
    PIB_CPU_KERNELS_AVX512 = 3,
    PIB_CPU_KERNELS_NEON = 4,
    PIB_CPU_KERNELS_NEON_DOTPROD = 5,
    PIB_CPU_KERNELS_NEON_FP16 = 6,
} pib_cpu_kernels;

/* n_threads <= 0 means all hardware threads. memory_capacity 0 means "the machine's RAM";
 * otherwise buffer_alloc fails with PIB_ERR_OUT_OF_MEMORY once the capacity would be exceeded.
 * Kernels are deterministic: every output element is computed by one thread in a fixed order,
 * so results do not depend on n_threads. */
int pib_cpu_backend_create(int32_t n_threads, size_t memory_capacity, pib_backend *out);

/* pib_cpu_backend_create with an explicit pib_cpu_kernels level: PIB_ERR_UNSUPPORTED when the
 * CPU (or this build) lacks it, PIB_ERR_INVALID_ARGUMENT for an unknown value. */
int pib_cpu_backend_create_with(int32_t n_threads, size_t memory_capacity, int32_t kernels,
                                pib_backend *out);

#ifdef __cplusplus
}
#endif

#endif
