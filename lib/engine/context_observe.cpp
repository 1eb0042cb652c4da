// The FFN observer: how a predictor trainer reads, through the engine, what every layer's
// predictor sees and which neurons truly fire.
#include "engine/context.hpp"
#include "engine/offload.hpp"

namespace pi {

void context::set_ffn_observer(ffn_observer observer) {
    const offload* off = options_.offloaded;
    for (size_t il = 0; observer && off && il < off->n_layers(); ++il)
        if (!off->layer(il).hot.empty())
            fail(status::unsupported, "the FFN of layer ", il,
                 " runs partly on the offload device, whose activations an FFN observer cannot "
                 "see; load the model with offload_device = \"none\" or disable_gpu_index = 1");
    ffn_observer_ = std::move(observer);
}

// Called where the whole FFN runs on the host, after the GLU wrote the activations to `u` and
// before the down projection adds into `x` (in place, for ffn_down_t).
void context::observe_ffn(size_t il, int32_t n) {
    if (!ffn_observer_) return;
    cpu_->run("synchronize", &pib_vtable::synchronize);
    const hparams& h = model_.hp();
    const auto rows = static_cast<size_t>(n);
    const arena_tensors& a = host_.tensors();
    const ffn_observation seen{
        static_cast<int32_t>(il), n,
        std::span<const float>(host_.host_rows<float>(a.x), rows * static_cast<size_t>(h.n_embd)),
        std::span<const float>(host_.host_rows<float>(a.u), rows * static_cast<size_t>(h.n_ff))};
    if (!ffn_observer_(seen))
        fail(status::cancelled, "the FFN observer stopped decoding at layer ", il);
}

} // namespace pi
