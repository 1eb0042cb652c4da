"""config.json of a Hugging Face checkpoint -> ModelSpec: which engine architecture it is, its
hyperparameters, and whether its FFN activations are ReLU-sparse. Anything the engine cannot run
is refused here, with the reason."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .errors import ConvertError

SUPPORTED = (
    "LlamaForCausalLM (hidden_act relu for sparse output, relu or silu for --dense), "
    "SparseLlamaForCausalLM (ProSparse), Bamboo"
)


@dataclass(frozen=True)
class ModelSpec:
    arch: str  # GGUF general.architecture: "llama" or "bamboo"
    family: str  # what the config identified, for messages: ReluLLaMA, ProSparse, Bamboo, Llama
    relu: bool  # FFN activations are ReLU-family (sparse output possible)
    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_ctx: int
    rms_eps: float
    rope_theta: float
    rope_linear_factor: Optional[float]
    tie_embeddings: bool
    name: str
    # ProSparse's FATReLU cut: gate values at or below it are zeroed (the engine uses 0).
    fatrelu_threshold: Optional[float] = None
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    pad_token_id: Optional[int] = None

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


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


def _spec(path: Path, folder: Path, c: dict[str, Any]) -> ModelSpec:
    archs = c.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    archs = [str(a) for a in archs]
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

    n_embd = _int(path, c, "hidden_size")
    n_head = _int(path, c, "num_attention_heads")
    n_head_kv = _int(path, c, "num_key_value_heads", n_head)
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
        n_vocab=_int(path, c, "vocab_size"),
        n_embd=n_embd,
        n_layer=_int(path, c, "num_hidden_layers"),
        n_ff=_int(path, c, "intermediate_size"),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ctx=n_ctx,
        rms_eps=_float(path, c, "rms_norm_eps", 1e-6),
        rope_theta=_float(path, c, "rope_theta", 10000.0),
        rope_linear_factor=_rope_scaling(path, c.get("rope_scaling")),
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        name=_name(folder, c),
        fatrelu_threshold=fatrelu,
        bos_token_id=_token_id(c.get("bos_token_id")),
        eos_token_id=_token_id(c.get("eos_token_id")),
        pad_token_id=_token_id(c.get("pad_token_id")),
    )


def _int(path: Path, c: dict[str, Any], key: str, default: Optional[int] = None) -> int:
    v = c.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConvertError(path, f"{key} must be a positive integer, not {v!r}", key)
    return v


def _float(path: Path, c: dict[str, Any], key: str, default: float) -> float:
    v = c.get(key, default)
    if v is None:
        return default
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise ConvertError(path, f"{key} must be a positive number, not {v!r}", key)
    return float(v)


def _rope_scaling(path: Path, scaling: Any) -> Optional[float]:
    if not scaling:
        return None
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    if kind == "default":
        return None
    if kind != "linear":
        raise ConvertError(path, f"rope_scaling type {kind!r}: the engine implements only linear RoPE scaling", "rope_scaling")
    factor = scaling.get("factor")
    if not isinstance(factor, (int, float)) or not factor > 0:
        raise ConvertError(path, f"linear rope_scaling needs a positive factor, not {factor!r}", "rope_scaling")
    return float(factor)


def _token_id(v: Any) -> Optional[int]:
    if isinstance(v, list):  # some configs list several EOS ids; the first is the primary one
        v = v[0] if v else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _name(folder: Path, c: dict[str, Any]) -> str:
    given = c.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return Path(given.rstrip("/")).name
    return folder.resolve().name
