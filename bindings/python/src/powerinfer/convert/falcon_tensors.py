"""The tensors of a `falcon` file from a Falcon checkpoint (docs/converter.md):

    token_embd              transformer.word_embeddings
    output_norm(.bias)      transformer.ln_f
    output                  lm_head, or the embeddings when tied (as Hugging Face ties them)
    blk.N.attn_norm(.bias)  input_layernorm; with two norms (Falcon-40B) ln_mlp, the FFN's
    blk.N.attn_norm_2(.bias) ln_attn, the attention's (two norms only)
    blk.N.attn_qkv          self_attention.query_key_value, rows reordered (qkv_row_order)
    blk.N.attn_output       self_attention.dense
    blk.N.ffn_up            mlp.dense_h_to_4h
    blk.N.ffn_down          mlp.dense_4h_to_h (dense files), or transposed as ffn_down_t (sparse)
    blk.N.fc1, fc2          the predictor (sparse)

No Q/K permutation: Hugging Face's Falcon rotates the two halves of each head, which is the
engine's NeoX RoPE."""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from .model_spec import ModelSpec
from .planned_tensor import PlannedTensor, Planner
from .predictor import Predictor
from .tensor_source import TensorRef

FALCON_IGNORED = re.compile(r"^transformer\.h\.\d+\.self_attention\.(maybe_rotary|rotary_emb)\.inv_freq$")


def qkv_row_order(n_head: int, n_head_kv: int, head_dim: int) -> tuple[int, ...]:
    """Source rows of attn_qkv in the engine's order: all query heads, then all key heads, then
    all value heads.

    Hugging Face's query_key_value holds n_head_kv groups, each of its n_head / n_head_kv query
    heads followed by the group's key head and value head (FalconAttention._split_heads).
    Multi-query (one group) is thus already in order, and without grouping (every query head
    its own key and value) a group is one (q, k, v) triple. Query head h belongs to group
    h // (n_head / n_head_kv), the engine's grouped-query rule, so no query head changes place
    relative to its key and value head."""
    q_per_kv = n_head // n_head_kv
    heads = np.arange(n_head_kv * (q_per_kv + 2)).reshape(n_head_kv, q_per_kv + 2)
    order = np.concatenate([heads[:, :q_per_kv].reshape(-1), heads[:, q_per_kv], heads[:, q_per_kv + 1]])
    rows = order[:, None] * head_dim + np.arange(head_dim)[None, :]
    return tuple(int(r) for r in rows.reshape(-1))


def plan_falcon(spec: ModelSpec, tensors: dict[str, TensorRef], predictor: Optional[Predictor], dense: bool, f32: bool) -> list[PlannedTensor]:
    plan = Planner(spec, tensors, f32, FALCON_IGNORED)
    d, ff = spec.n_embd, spec.n_ff
    plan.add("token_embd.weight", "transformer.word_embeddings.weight", (spec.n_vocab, d))
    plan.add("output_norm.weight", "transformer.ln_f.weight", (d,))
    plan.add("output_norm.bias", "transformer.ln_f.bias", (d,))
    if spec.tie_embeddings:
        plan.add("output.weight", "transformer.word_embeddings.weight", (spec.n_vocab, d))
        plan.skip("lm_head.weight")
    else:
        plan.add("output.weight", "lm_head.weight", (spec.n_vocab, d))

    qkv_rows = (spec.n_head + 2 * spec.n_head_kv) * spec.head_dim
    order = qkv_row_order(spec.n_head, spec.n_head_kv, spec.head_dim)
    in_order = order == tuple(range(qkv_rows))
    for il in range(spec.n_layer):
        hf, blk = f"transformer.h.{il}.", f"blk.{il}."
        ffn_norm = "ln_mlp" if spec.two_norms else "input_layernorm"
        for part in ("weight", "bias"):
            plan.add(f"{blk}attn_norm.{part}", f"{hf}{ffn_norm}.{part}", (d,))
        if spec.two_norms:
            for part in ("weight", "bias"):
                plan.add(f"{blk}attn_norm_2.{part}", f"{hf}ln_attn.{part}", (d,))
        qkv = hf + "self_attention.query_key_value.weight"
        if in_order:
            plan.add(blk + "attn_qkv.weight", qkv, (qkv_rows, d))
        else:
            plan.add(blk + "attn_qkv.weight", qkv, (qkv_rows, d), "rows", row_order=order)
        plan.add(blk + "attn_output.weight", hf + "self_attention.dense.weight", (d, d))
        plan.add(blk + "ffn_up.weight", hf + "mlp.dense_h_to_4h.weight", (ff, d))
        if dense:
            plan.add(blk + "ffn_down.weight", hf + "mlp.dense_4h_to_h.weight", (d, ff))
        else:
            plan.add(blk + "ffn_down_t.weight", hf + "mlp.dense_4h_to_h.weight", (d, ff), "transpose")
            plan.add_predictor(blk, predictor, il)
    plan.check_all_used()
    return plan.out
