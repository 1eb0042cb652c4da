"""The tensors of an `opt` file from an OPT checkpoint (docs/converter.md), with P the decoder's
prefix (`model.decoder.` as OPTForCausalLM saves it, `decoder.` in checkpoints of the bare
OPTModel):

    token_embd              P.embed_tokens
    position_embd           P.embed_positions: n_ctx + 2 rows, Hugging Face's offset rows kept
    output_norm(.bias)      P.final_layer_norm
    output                  lm_head, only when the embeddings are not tied
    blk.N.attn_norm(.bias)  self_attn_layer_norm
    blk.N.attn_q/k/v(.bias) self_attn.q_proj / k_proj / v_proj, as they are (OPT has no RoPE)
    blk.N.attn_output(.bias) self_attn.out_proj
    blk.N.ffn_norm(.bias)   final_layer_norm (the layer's)
    blk.N.ffn_up(.bias)     fc1
    blk.N.ffn_down(.bias)   fc2 (dense files); sparse files: ffn_down_t = fc2.weight transposed,
                            and ffn_down_t.bias = fc2.bias (one value per output channel)
    blk.N.fc1, fc2          the predictor (sparse)"""

from __future__ import annotations

import re
from typing import Optional

from .model_spec import ModelSpec
from .planned_tensor import PlannedTensor, Planner
from .predictor import Predictor
from .tensor_source import TensorRef

NOTHING = re.compile(r"(?!)")  # OPT checkpoints hold no buffers to pass over


def decoder_prefix(tensors: dict[str, TensorRef]) -> str:
    return "decoder." if "decoder.embed_tokens.weight" in tensors and "model.decoder.embed_tokens.weight" not in tensors else "model.decoder."


def plan_opt(spec: ModelSpec, tensors: dict[str, TensorRef], predictor: Optional[Predictor], dense: bool, f32: bool) -> list[PlannedTensor]:
    plan = Planner(spec, tensors, f32, NOTHING)
    d, ff = spec.n_embd, spec.n_ff
    p = decoder_prefix(tensors)

    def with_bias(name: str, source: str, shape: tuple[int, ...], transform: str = "copy") -> None:
        plan.add(name + ".weight", source + ".weight", shape, transform)
        plan.add(name + ".bias", source + ".bias", shape[:1])  # a Linear's bias: its output channels

    plan.add("token_embd.weight", p + "embed_tokens.weight", (spec.n_vocab, d))
    plan.add("position_embd.weight", p + "embed_positions.weight", (spec.n_pos, d))
    with_bias("output_norm", p + "final_layer_norm", (d,))
    if spec.tie_embeddings:
        plan.skip("lm_head.weight")  # Hugging Face uses the embeddings, whatever is stored here
    else:
        plan.add("output.weight", "lm_head.weight", (spec.n_vocab, d))
    for il in range(spec.n_layer):
        hf, blk = f"{p}layers.{il}.", f"blk.{il}."
        with_bias(blk + "attn_norm", hf + "self_attn_layer_norm", (d,))
        for ours, theirs in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "out_proj")):
            with_bias(blk + ours, hf + "self_attn." + theirs, (d, d))
        with_bias(blk + "ffn_norm", hf + "final_layer_norm", (d,))
        with_bias(blk + "ffn_up", hf + "fc1", (ff, d))
        if dense:
            with_bias(blk + "ffn_down", hf + "fc2", (d, ff))
        else:
            with_bias(blk + "ffn_down_t", hf + "fc2", (d, ff), "transpose")
            plan.add_predictor(blk, predictor, il)
    plan.check_all_used()
    return plan.out
