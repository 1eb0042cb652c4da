"""Which GGUF tensor comes from which checkpoint tensor, and how (docs/file-format.md,
docs/converter.md). For llama / bamboo:

* token_embd, output_norm, output, blk.N.{attn_norm, attn_v, attn_output, ffn_norm, ffn_gate,
  ffn_up} are copied (HF [out, in] is GGUF ne=[in, out]: the same bytes);
* blk.N.attn_q / attn_k have their rows permuted as llama.cpp's convert.py `permute` does (with
  n_head for Q and n_head_kv for K), turning HF's rotate-half RoPE layout into the interleaved
  pairs RoPE mode 0 rotates:
      w.reshape(n_head, 2, head_dim // 2, n_embd).swapaxes(1, 2).reshape(w.shape)
* sparse files store blk.N.ffn_down_t = down_proj.weight.T (one row per FFN neuron) and the
  predictor's blk.N.fc1 / fc2 as they are; dense files store blk.N.ffn_down as it is.

Falcon and OPT have plans of their own (falcon_tensors.py, opt_tensors.py)."""

from __future__ import annotations

import re
from typing import Optional

from .falcon_tensors import plan_falcon
from .model_spec import ModelSpec
from .opt_tensors import plan_opt
from .planned_tensor import PlannedTensor, Planner
from .predictor import Predictor
from .tensor_source import TensorRef

__all__ = ["PlannedTensor", "plan_tensors"]

LLAMA_IGNORED = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")


def plan_tensors(spec: ModelSpec, tensors: dict[str, TensorRef], predictor: Optional[Predictor], dense: bool, f32: bool) -> list[PlannedTensor]:
    if spec.arch == "falcon":
        return plan_falcon(spec, tensors, predictor, dense, f32)
    if spec.arch == "opt":
        return plan_opt(spec, tensors, predictor, dense, f32)
    return _plan_llama(spec, tensors, predictor, dense, f32)


def _plan_llama(spec: ModelSpec, tensors: dict[str, TensorRef], predictor: Optional[Predictor], dense: bool, f32: bool) -> list[PlannedTensor]:
    plan = Planner(spec, tensors, f32, LLAMA_IGNORED)
    plan.add("token_embd.weight", "model.embed_tokens.weight", (spec.n_vocab, spec.n_embd))
    plan.add("output_norm.weight", "model.norm.weight", (spec.n_embd,))
    if "lm_head.weight" in tensors or not spec.tie_embeddings:
        plan.add("output.weight", "lm_head.weight", (spec.n_vocab, spec.n_embd))
    else:
        plan.add("output.weight", "model.embed_tokens.weight", (spec.n_vocab, spec.n_embd))
    kv = spec.n_head_kv * spec.head_dim
    for il in range(spec.n_layer):
        hf, blk = f"model.layers.{il}.", f"blk.{il}."
        plan.add(blk + "attn_norm.weight", hf + "input_layernorm.weight", (spec.n_embd,))
        plan.add(blk + "attn_q.weight", hf + "self_attn.q_proj.weight", (spec.n_embd, spec.n_embd), "permute", spec.n_head)
        plan.add(blk + "attn_k.weight", hf + "self_attn.k_proj.weight", (kv, spec.n_embd), "permute", spec.n_head_kv)
        plan.add(blk + "attn_v.weight", hf + "self_attn.v_proj.weight", (kv, spec.n_embd))
        plan.add(blk + "attn_output.weight", hf + "self_attn.o_proj.weight", (spec.n_embd, spec.n_embd))
        plan.add(blk + "ffn_norm.weight", hf + "post_attention_layernorm.weight", (spec.n_embd,))
        plan.add(blk + "ffn_gate.weight", hf + "mlp.gate_proj.weight", (spec.n_ff, spec.n_embd))
        plan.add(blk + "ffn_up.weight", hf + "mlp.up_proj.weight", (spec.n_ff, spec.n_embd))
        if dense:
            plan.add(blk + "ffn_down.weight", hf + "mlp.down_proj.weight", (spec.n_embd, spec.n_ff))
        else:
            plan.add(blk + "ffn_down_t.weight", hf + "mlp.down_proj.weight", (spec.n_embd, spec.n_ff), "transpose")
            plan.add_predictor(blk, predictor, il)
    plan.check_all_used()
    return plan.out
