"""config.json of an OPT checkpoint (OPTForCausalLM) -> ModelSpec for the engine's `opt`
architecture (docs/forward-pass.md): learned positions, pre-LayerNorm blocks with a bias on
every projection and norm, no RoPE, ReLU FFN without a gate, tied output.

Refused, as the engine's block does not compute them: post-LayerNorm blocks
(do_layer_norm_before false, OPT-350m), projected embeddings (word_embed_proj_dim other than
hidden_size, also OPT-350m), other activations, and configs without biases or norm weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConvertError
from .model_spec import ModelSpec, first_int, int_value, model_name, refuse_if, token_id

OPT_ARCHS = ("OPTForCausalLM",)
# Hugging Face's OPT LayerNorms use torch's default epsilon; the config does not carry it.
OPT_LAYER_NORM_EPS = 1e-5


def opt_spec(path: Path, folder: Path, c: dict[str, Any]) -> ModelSpec:
    refuse_if(path, c, "do_layer_norm_before", False, True, "post-LayerNorm blocks (as in OPT-350m) are not the pre-LayerNorm block the engine computes")
    refuse_if(path, c, "_remove_final_layer_norm", True, False, "the engine's OPT ends with the final LayerNorm")
    refuse_if(path, c, "enable_bias", False, True, "the engine's OPT has biases on every projection")
    refuse_if(path, c, "layer_norm_elementwise_affine", False, True, "the engine's OPT LayerNorms have weights and biases")
    act = str(c.get("activation_function", "relu")).lower()
    if act != "relu":
        raise ConvertError(path, f"{act!r} is not relu: the engine computes OPT's FFN as relu(up*x + b)", "activation_function")

    n_embd = int_value(path, c, "hidden_size")
    proj = first_int(path, c, ("word_embed_proj_dim",), n_embd)
    if proj != n_embd:
        raise ConvertError(path, f"word_embed_proj_dim {proj} differs from hidden_size {n_embd}: projected embeddings (project_in / project_out, as in OPT-350m) are not part of the engine's OPT", "word_embed_proj_dim")
    n_head = int_value(path, c, "num_attention_heads")
    if n_embd % n_head:
        raise ConvertError(path, f"hidden_size {n_embd} is not a multiple of num_attention_heads {n_head}", "hidden_size")

    return ModelSpec(
        arch="opt",
        family="OPT",
        relu=True,
        n_vocab=int_value(path, c, "vocab_size"),
        n_embd=n_embd,
        n_layer=int_value(path, c, "num_hidden_layers"),
        n_ff=int_value(path, c, "ffn_dim"),
        n_head=n_head,
        n_head_kv=n_head,
        n_ctx=int_value(path, c, "max_position_embeddings", 2048),
        rms_eps=0.0,
        rope_theta=10000.0,  # unused: OPT has no RoPE
        rope_linear_factor=None,
        tie_embeddings=bool(c.get("tie_word_embeddings", True)),
        name=model_name(folder, c),
        bos_token_id=token_id(c.get("bos_token_id")),
        eos_token_id=token_id(c.get("eos_token_id")),
        pad_token_id=token_id(c.get("pad_token_id")),
        norm_eps=OPT_LAYER_NORM_EPS,
    )
