"""ModelSpec: what config.json says about a model, as the converter needs it, and the checked
readers of config values that every architecture's config reader shares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .errors import ConvertError


@dataclass(frozen=True)
class ModelSpec:
    arch: str  # GGUF general.architecture: "llama", "bamboo", "falcon" or "opt"
    family: str  # what the config identified, for messages: ReluLLaMA, ProSparse, Bamboo, Llama, Falcon, OPT
    relu: bool  # FFN activations are ReLU-family (sparse output possible)
    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_ctx: int
    rms_eps: float  # llama / bamboo (RMSNorm); 0 for the LayerNorm architectures
    rope_theta: float
    rope_linear_factor: Optional[float]
    tie_embeddings: bool
    name: str
    # ProSparse's FATReLU cut: gate values at or below it are zeroed (the engine uses 0).
    fatrelu_threshold: Optional[float] = None
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    pad_token_id: Optional[int] = None
    norm_eps: float = 0.0  # falcon / opt: the LayerNorm epsilon
    # Falcon's new decoder architecture (40B) with two norms per block: ln_attn for the
    # attention, ln_mlp for the FFN. Otherwise one input_layernorm serves both.
    two_norms: bool = False

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_pos(self) -> int:
        """OPT: rows of the learned position table (Hugging Face keeps 2 offset rows)."""
        return self.n_ctx + 2


def int_value(path: Path, c: dict[str, Any], key: str, default: Optional[int] = None) -> int:
    v = c.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConvertError(path, f"{key} must be a positive integer, not {v!r}", key)
    return v


def float_value(path: Path, c: dict[str, Any], key: str, default: float) -> float:
    v = c.get(key, default)
    if v is None:
        return default
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise ConvertError(path, f"{key} must be a positive number, not {v!r}", key)
    return float(v)


def first_int(path: Path, c: dict[str, Any], keys: tuple[str, ...], default: Optional[int] = None) -> int:
    """The first of `keys` that the config has (Falcon's configs renamed several keys)."""
    for key in keys:
        if key in c and c[key] is not None:
            return int_value(path, c, key)
    return int_value(path, {keys[0]: default}, keys[0])


def rope_theta(path: Path, c: dict[str, Any]) -> float:
    """rope_theta, or (transformers >= 5) rope_parameters.rope_theta; default 10000."""
    params = c.get("rope_parameters")
    if c.get("rope_theta") is None and isinstance(params, dict) and params.get("rope_theta") is not None:
        return float_value(path, params, "rope_theta", 10000.0)
    return float_value(path, c, "rope_theta", 10000.0)


def rope_linear_factor(path: Path, c: dict[str, Any]) -> Optional[float]:
    """The factor of linear RoPE scaling (rope_scaling, or transformers >= 5's rope_parameters),
    None without scaling; other kinds of scaling are refused."""
    scaling = c.get("rope_scaling") or c.get("rope_parameters")
    return rope_scaling(path, scaling)


def rope_scaling(path: Path, scaling: Any) -> Optional[float]:
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


def token_id(v: Any) -> Optional[int]:
    if isinstance(v, list):  # some configs list several EOS ids; the first is the primary one
        v = v[0] if v else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def model_name(folder: Path, c: dict[str, Any]) -> str:
    given = c.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return Path(given.rstrip("/")).name
    return folder.resolve().name


def refuse_if(path: Path, c: dict[str, Any], key: str, bad: Any, default: Any, reason: str) -> None:
    """Refuses when config key `key` (absent: `default`) equals `bad`."""
    if c.get(key, default) == bad:
        raise ConvertError(path, f"{json.dumps(bad)}: {reason}", key)
