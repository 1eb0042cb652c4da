// Whole-model loading on mutated model files (seeds: tiny sparse, dense, Falcon and OPT models of
// lib/synthetic): the header, hyper-parameters, tokenizer and every tensor binding of
// pi::model::load. A model that loads decodes one token in a small context, which reads every
// bound weight, so a binding that lets a short or misshapen tensor through faults here.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/context.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "model/model.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = pi::fuzz::write_input("model.gguf", data, size);
    pi::load_options load;
    // Both ways to reach the weights: the mapping, or the copy of the data section. The choice
    // follows from the input so that a finding reproduces.
    load.use_mmap = size % 2 == 0;
    try {
        const auto m = pi::model::load(path, load);
        pi::context_options options;
        options.n_ctx = 8;
        options.n_batch = 1;
        pi::context ctx(*m, options);
        const int32_t token = m->vocab().n_tokens() > 1 ? 1 : 0;
        ctx.decode(pi::batch_view{std::span(&token, 1), {}, {}});
        pi::fuzz::note_accepted();
    } catch (const pi::error&) {
    }
    return 0;
}
