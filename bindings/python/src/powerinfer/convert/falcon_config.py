"""config.json of a Falcon checkpoint (FalconForCausalLM, or the older custom-code RWForCausalLM)
-> ModelSpec for the engine's `falcon` architecture (docs/forward-pass.md): a parallel block of
NeoX-RoPE attention and a gate-free ReLU FFN over LayerNorms with biases.

Which variant a config is decides the heads of the fused query_key_value matrix, as Hugging
Face's FalconAttention reads it:
* new_decoder_architecture (Falcon-40B; the old custom code's model_type "RefinedWeb"):
  num_kv_heads groups (old name n_head_kv), two norms per block (ln_attn, ln_mlp) unless
  num_ln_in_parallel_attn is 1;
* multi_query (Falcon-7B, the default): one K and one V head shared by all query heads;
* neither: every query head has its own K and V head."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConvertError
from .model_spec import ModelSpec, first_int, float_value, int_value, model_name, refuse_if, rope_linear_factor, rope_theta, token_id

FALCON_ARCHS = ("FalconForCausalLM", "RWForCausalLM")


def falcon_spec(path: Path, folder: Path, c: dict[str, Any]) -> ModelSpec:
    refuse_if(path, c, "alibi", True, False, "the engine's Falcon uses rotary position embeddings, not ALiBi")
    refuse_if(path, c, "bias", True, False, "the engine's Falcon has no biases on its linear layers")
    new_arch = bool(c.get("new_decoder_architecture", False)) or c.get("model_type") == "RefinedWeb"
    if not new_arch:
        refuse_if(path, c, "parallel_attn", False, True, "the engine runs Falcon's attention and FFN in parallel (new_decoder_architecture is false)")
    _check_activation(path, c)

    n_embd = first_int(path, c, ("hidden_size", "n_embed"))
    n_head = first_int(path, c, ("num_attention_heads", "n_head"))
    if new_arch:
        n_head_kv = first_int(path, c, ("num_kv_heads", "n_head_kv"), n_head)
    elif c.get("multi_query", True):
        n_head_kv = 1
    else:
        n_head_kv = n_head
    if n_embd % n_head or (n_embd // n_head) % 2:
        raise ConvertError(path, f"hidden_size {n_embd} is not an even head dimension times num_attention_heads {n_head}", "hidden_size")
    if n_head % n_head_kv:
        raise ConvertError(path, f"num_kv_heads {n_head_kv} does not divide num_attention_heads {n_head}", "num_kv_heads")
    n_ln = c.get("num_ln_in_parallel_attn")
    if n_ln not in (None, 1, 2):
        raise ConvertError(path, f"num_ln_in_parallel_attn {n_ln!r} is not 1 or 2", "num_ln_in_parallel_attn")
    two_norms = new_arch and n_ln != 1

    return ModelSpec(
        arch="falcon",
        family="Falcon",
        relu=True,
        n_vocab=int_value(path, c, "vocab_size"),
        n_embd=n_embd,
        n_layer=first_int(path, c, ("num_hidden_layers", "n_layer")),
        n_ff=first_int(path, c, ("ffn_hidden_size",), 4 * n_embd),
        n_head=n_head,
        n_head_kv=n_head_kv,
        # Falcon's configs have had no training context (2048, as PowerInfer writes).
        n_ctx=int_value(path, c, "max_position_embeddings", 2048),
        rms_eps=0.0,
        rope_theta=rope_theta(path, c),
        rope_linear_factor=rope_linear_factor(path, c),
        tie_embeddings=bool(c.get("tie_word_embeddings", True)),
        name=model_name(folder, c),
        bos_token_id=token_id(c.get("bos_token_id")),
        eos_token_id=token_id(c.get("eos_token_id")),
        pad_token_id=token_id(c.get("pad_token_id")),
        norm_eps=float_value(path, c, "layer_norm_epsilon", 1e-5),
        two_norms=two_norms,
    )


def _check_activation(path: Path, c: dict[str, Any]) -> None:
    act = c.get("activation")
    if act is None:
        raise ConvertError(
            path,
            "has no activation, so Hugging Face's Falcon uses GELU; the engine computes Falcon's FFN as relu(up*x), so only a ReLU Falcon (such as ReluFalcon) converts: if this checkpoint is one, set \"activation\": \"relu\" in config.json",
            "activation",
        )
    if str(act).lower() != "relu":
        raise ConvertError(
            path,
            f"{act!r} is not relu: the engine computes Falcon's FFN as relu(up*x), sparse or dense, so a {act} Falcon would compute another function and has no ReLU sparsity",
            "activation",
        )
