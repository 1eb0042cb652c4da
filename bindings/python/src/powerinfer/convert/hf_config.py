"""config.json of a Hugging Face checkpoint -> ModelSpec: which engine architecture it is, its
hyperparameters, and whether its FFN activations are ReLU-sparse. Anything the engine cannot run
is refused here, with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from .errors import ConvertError
from .falcon_config import FALCON_ARCHS, falcon_spec
from .model_spec import ModelSpec, float_value, int_value, model_name, rope_linear_factor, rope_theta, token_id
from .opt_config import OPT_ARCHS, opt_spec

__all__ = ["ModelSpec", "SUPPORTED", "read_config"]

SUPPORTED = (
    "LlamaForCausalLM (hidden_act relu for sparse output, relu or silu for --dense), "
    "SparseLlamaForCausalLM (ProSparse), Bamboo, "
    "FalconForCausalLM / RWForCausalLM (activation relu), OPTForCausalLM (activation_function relu)"
)


def read_config(folder: Path) -> ModelSpec:
    path = folder / "config.json"
    if not path.is_file():
        raise ConvertError(path, "missing: a Hugging Face model folder needs its config.json")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(path, f"is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise ConvertError(path, "is not a JSON object")
    return _spec(path, folder, config)


def _archs(c: dict[str, Any]) -> list[str]:
    archs = c.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    return [str(a) for a in archs]


def _spec(path: Path, folder: Path, c: dict[str, Any]) -> ModelSpec:
    archs, model_type = _archs(c), str(c.get("model_type", ""))
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel") or any(a in FALCON_ARCHS for a in archs):
        return falcon_spec(path, folder, c)
    if model_type == "opt" or any(a in OPT_ARCHS for a in archs):
        return opt_spec(path, folder, c)
    return _llama_spec(path, folder, c)


def _llama_spec(path: Path, folder: Path, c: dict[str, Any]) -> ModelSpec:
    archs = _archs(c)
    model_type = str(c.get("model_type", ""))
    act = str(c.get("hidden_act", c.get("hidden_activation", "silu"))).lower()
    fatrelu: Optional[float] = None

    if model_type == "bamboo" or any("bamboo" in a.lower() for a in archs):
        arch, family = "bamboo", "Bamboo"
        if act != "relu":
            raise ConvertError(path, f"Bamboo with hidden_act {act!r}: the engine runs Bamboo only as relu(gate)*relu(up)", "hidden_act")
        relu = True
    elif model_type == "sparsellama" or "SparseLlamaForCausalLM" in archs:
        arch, family, relu = "llama", "ProSparse", True
        if act == "fatrelu":
            fatrelu = float(c.get("hidden_act_param", 0.0))
            if fatrelu < 0:
                raise ConvertError(path, f"FATReLU threshold {fatrelu} is negative: negative gate values would pass, which relu(gate)*up cannot run", "hidden_act_param")
        elif act != "relu":
            raise ConvertError(path, f"ProSparse with hidden_act {act!r}: only relu and fatrelu are sparse activations the engine runs", "hidden_act")
    elif model_type == "llama" or "LlamaForCausalLM" in archs:
        arch = "llama"
        if act == "relu":
            family, relu = "ReluLLaMA", True
        elif act in ("silu", "swish"):
            family, relu = "Llama", False
        else:
            raise ConvertError(path, f"hidden_act {act!r} is neither relu nor silu, the two FFN activations the engine computes", "hidden_act")
    else:
        shown = ", ".join(archs) or "none"
        raise ConvertError(path, f"unknown architecture (architectures: {shown}; model_type: {model_type or 'none'}); supported: {SUPPORTED}", "architectures")

    for key in ("attention_bias", "mlp_bias"):
        if c.get(key):
            raise ConvertError(path, f"{key} is true: the engine's llama graph has no biases", key)

    n_embd = int_value(path, c, "hidden_size")
    n_head = int_value(path, c, "num_attention_heads")
    n_head_kv = int_value(path, c, "num_key_value_heads", n_head)
    if n_embd % n_head or (n_embd // n_head) % 2:
        raise ConvertError(path, f"hidden_size {n_embd} is not an even head dimension times num_attention_heads {n_head}", "hidden_size")
    if n_head % n_head_kv:
        raise ConvertError(path, f"num_key_value_heads {n_head_kv} does not divide num_attention_heads {n_head}", "num_key_value_heads")
    head_dim = c.get("head_dim")
    if head_dim is not None and head_dim != n_embd // n_head:
        raise ConvertError(path, f"head_dim {head_dim} differs from hidden_size / num_attention_heads = {n_embd // n_head}; the engine requires them equal", "head_dim")
    n_ctx = c.get("max_position_embeddings", c.get("max_sequence_length"))
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        raise ConvertError(path, "has no positive max_position_embeddings (the training context)", "max_position_embeddings")

    return ModelSpec(
        arch=arch,
        family=family,
        relu=relu,
        n_vocab=int_value(path, c, "vocab_size"),
        n_embd=n_embd,
        n_layer=int_value(path, c, "num_hidden_layers"),
        n_ff=int_value(path, c, "intermediate_size"),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ctx=n_ctx,
        rms_eps=float_value(path, c, "rms_norm_eps", 1e-6),
        rope_theta=rope_theta(path, c),
        rope_linear_factor=rope_linear_factor(path, c),
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        name=model_name(folder, c),
        fatrelu_threshold=fatrelu,
        bos_token_id=token_id(c.get("bos_token_id")),
        eos_token_id=token_id(c.get("eos_token_id")),
        pad_token_id=token_id(c.get("pad_token_id")),
    )


