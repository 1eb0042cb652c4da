// The 0.1 ABI of the default-params functions. 0.1 exported pi_*_default_params() returning their
// structs by value, so a program built against 0.1 calls them with room for 0.1's sizes only; since
// 0.2 the header makes them inline functions over pi_*_params_init() (docs/abi.md). These keep the
// old symbols, each returning the defaults at its 0.1 size. This file must not include
// powerinfer.h, whose inline functions of the same names it replaces for old programs.
#include <cstddef>
#include <cstdint>

namespace {

// A 0.1 struct as its caller sees it: its size and alignment (every one of these is returned in
// memory through the caller's pointer, larger than 16 bytes, as the original struct was).
template <size_t Size> struct alignas(8) frozen_params { unsigned char bytes[Size]; };

// The 0.1 sizes (x86-64 and AArch64 LP64), from tests/abi/frozen/powerinfer-0.1.0.h.
constexpr size_t model_size = 88, context_size = 32, sampler_size = 24, generate_size = 80,
                 synth_size = 88, quantize_size = 40;

// Instantiated here so that each is a complete type where the extern "C" functions return it
// (synth_size is model_size, 88: one instantiation serves both).
template struct frozen_params<model_size>;
template struct frozen_params<context_size>;
template struct frozen_params<sampler_size>;
template struct frozen_params<generate_size>;
template struct frozen_params<quantize_size>;

} // namespace

#if defined(_WIN32)
#define PI_FROZEN_EXPORT __declspec(dllexport)
#else
#define PI_FROZEN_EXPORT __attribute__((visibility("default")))
#endif

extern "C" {

int pi_model_params_init(void* params, size_t struct_size);
int pi_context_params_init(void* params, size_t struct_size);
int pi_sampler_params_init(void* params, size_t struct_size);
int pi_generate_params_init(void* params, size_t struct_size);
int pi_synth_params_init(void* params, size_t struct_size);
int pi_quantize_params_init(void* params, size_t struct_size);

#define PI_FROZEN_DEFAULTS(name, size)                                                             \
    PI_FROZEN_EXPORT frozen_params<size> pi_##name##_default_params(void) {                        \
        frozen_params<size> p;                                                                     \
        pi_##name##_params_init(&p, size);                                                         \
        return p;                                                                                  \
    }

PI_FROZEN_DEFAULTS(model, model_size)
PI_FROZEN_DEFAULTS(context, context_size)
PI_FROZEN_DEFAULTS(sampler, sampler_size)
PI_FROZEN_DEFAULTS(generate, generate_size)
PI_FROZEN_DEFAULTS(synth, synth_size)
PI_FROZEN_DEFAULTS(quantize, quantize_size)

} // extern "C"
