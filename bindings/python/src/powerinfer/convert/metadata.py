"""The GGUF metadata of a converted model (docs/file-format.md, docs/converter.md)."""

from __future__ import annotations

from typing import Optional

from .gguf_writer import F32 as KV_F32
from .gguf_writer import I32, STRING, GGUFWriter
from .model_spec import ModelSpec
from .tokenizer_vocab import Vocab

# general.file_type (llama_ftype): 0 all F32, 1 mostly F16 (1-D tensors F32).
FILE_TYPE = {"f32": 0, "f16": 1}


def add_metadata(w: GGUFWriter, spec: ModelSpec, vocab: Vocab, file_type: str, sparse: bool, threshold: Optional[float]) -> None:
    a = spec.arch
    w.add_string("general.architecture", a)
    w.add_string("general.name", spec.name)
    w.add_u32("general.file_type", FILE_TYPE[file_type])
    w.add_u32(f"{a}.context_length", spec.n_ctx)
    if a == "falcon":
        # How attn_qkv is laid out (all Q heads, then K, then V), as PowerInfer and llama.cpp
        # name it; informative, nothing reads it.
        w.add_string("falcon.tensor_data_layout", "jploski")
    w.add_u32(f"{a}.embedding_length", spec.n_embd)
    w.add_u32(f"{a}.block_count", spec.n_layer)
    w.add_u32(f"{a}.feed_forward_length", spec.n_ff)
    w.add_u32(f"{a}.attention.head_count", spec.n_head)
    w.add_u32(f"{a}.attention.head_count_kv", spec.n_head_kv)
    if a in ("falcon", "opt"):
        w.add_f32(f"{a}.attention.layer_norm_epsilon", spec.norm_eps)
    else:
        w.add_f32(f"{a}.attention.layer_norm_rms_epsilon", spec.rms_eps)
    if a != "opt":  # OPT has learned positions, no RoPE
        w.add_u32(f"{a}.rope.dimension_count", spec.head_dim)
        w.add_f32(f"{a}.rope.freq_base", spec.rope_theta)
        if spec.rope_linear_factor is not None:
            w.add_string(f"{a}.rope.scaling.type", "linear")
            w.add_f32(f"{a}.rope.scaling.factor", spec.rope_linear_factor)
    if sparse:
        w.add_f32("powerinfer.sparse_threshold", threshold if threshold is not None else 0.0)
    elif spec.relu and a in ("llama", "bamboo"):
        # Dense llama files default to SwiGLU; this tells the engine the model is ReLU (llama.cpp
        # ignores the key). falcon and opt have no gate and are ReLU by architecture.
        w.add_string("powerinfer.ffn_activation", "relu")
    if spec.fatrelu_threshold is not None:
        w.add_f32("powerinfer.fatrelu_threshold", spec.fatrelu_threshold)
    _add_vocab(w, vocab)


def _add_vocab(w: GGUFWriter, vocab: Vocab) -> None:
    w.add_string("tokenizer.ggml.model", vocab.model)
    if vocab.pre is not None:
        w.add_string("tokenizer.ggml.pre", vocab.pre)
    w.add_array("tokenizer.ggml.tokens", STRING, vocab.tokens)
    if vocab.model == "llama":  # byte-level BPE ranks its merges instead of scoring tokens
        w.add_array("tokenizer.ggml.scores", KV_F32, vocab.scores)
    w.add_array("tokenizer.ggml.token_type", I32, vocab.types)
    if vocab.merges is not None:
        w.add_array("tokenizer.ggml.merges", STRING, vocab.merges)
    names = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    for key, gguf_key in names.items():
        if vocab.special_ids.get(key) is not None:
            w.add_u32(f"tokenizer.ggml.{gguf_key}", vocab.special_ids[key])
    if vocab.add_bos is not None:
        w.add_bool("tokenizer.ggml.add_bos_token", vocab.add_bos)
    if vocab.add_eos is not None:
        w.add_bool("tokenizer.ggml.add_eos_token", vocab.add_eos)
    for name, template in sorted(vocab.chat_templates.items()):
        w.add_string("tokenizer.chat_template" + (f".{name}" if name else ""), template)
