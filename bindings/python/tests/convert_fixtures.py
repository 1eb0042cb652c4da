"""Writers of tiny Hugging Face model folders for the converter tests, made without torch:
safetensors files, torch.save-format zip files (the pickle written opcode by opcode), a
SentencePiece tokenizer.model (protobuf wire format), tokenizer.json; and a small GGUF reader to
check what the converter wrote."""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

# The one copy of the Q/K row order, shared with the really-trained fixture's tests.
from fixture_files import permute_for_rope  # noqa: F401 (used by test_convert)

# ---------------------------------------------------------------- safetensors


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], bf16: frozenset[str] = frozenset()) -> None:
    """Tensors in `bf16` are given as float32 and stored as BF16 (truncated)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs, at = [], 0
    for name, a in tensors.items():
        if name in bf16:
            data = (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
            dtype = "BF16"
        else:
            dtype = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}[a.dtype]
            data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * ((-len(raw)) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def bf16_round_trip(a: np.ndarray) -> np.ndarray:
    return ((np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16) << 16).view(np.float32)


# ---------------------------------------------------------------- torch.save zip format

_STORAGE = {np.dtype("float32"): "FloatStorage", np.dtype("float16"): "HalfStorage"}


class PickleOps:
    """Protocol-2 pickle opcodes, enough for what torch.save writes for a dict of tensors."""

    def __init__(self, header: bool = True) -> None:
        """header=False: bare opcodes, to go inside another pickle."""
        self.out = bytearray(b"\x80\x02" if header else b"")

    def op(self, b: bytes) -> None:
        self.out += b

    def string(self, s: str) -> None:
        b = s.encode()
        self.op(b"X" + struct.pack("<I", len(b)) + b)

    def int(self, v: int) -> None:
        self.op(b"J" + struct.pack("<i", v))

    def glob(self, module: str, name: str) -> None:
        self.op(b"c" + f"{module}\n{name}\n".encode())

    def value(self, v: Any) -> None:
        if isinstance(v, bool):
            self.op(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self.int(v)
        elif isinstance(v, float):
            self.op(b"G" + struct.pack(">d", v))
        else:
            self.string(str(v))

    def tuple(self, items: list[Any]) -> None:
        self.op(b"(")
        for v in items:
            self.value(v)
        self.op(b"t")


def torch_pickle(tensors: dict[str, np.ndarray], evil_global: Optional[tuple[str, str]] = None, prologue: bytes = b"", sizes: Optional[dict[str, list[Any]]] = None) -> bytes:
    """`prologue` is raw opcodes run first (their result popped by the caller's opcodes);
    `sizes` replaces a tensor's size tuple with arbitrary values, as a crafted file would."""
    p = PickleOps()
    p.op(prologue)
    p.glob("collections", "OrderedDict")
    p.op(b")R(")  # OrderedDict() then MARK for SETITEMS
    for key, (name, a) in enumerate(tensors.items()):
        p.string(name)
        p.glob("torch._utils", "_rebuild_tensor_v2")
        p.op(b"(")  # args tuple
        p.op(b"(")  # persistent id tuple
        p.string("storage")
        p.glob("torch", _STORAGE[a.dtype])
        p.string(str(key))
        p.string("cpu")
        p.int(a.size)
        p.op(b"tQ")  # TUPLE, BINPERSID
        p.int(0)
        p.tuple((sizes or {}).get(name, list(a.shape)))
        p.tuple([int(s // a.itemsize) for s in a.strides])
        p.op(b"\x89")  # requires_grad False
        p.glob("collections", "OrderedDict")
        p.op(b")R")
        p.op(b"tR")  # args TUPLE, REDUCE
    p.op(b"u")  # SETITEMS
    if evil_global is not None:
        p.glob(*evil_global)
        p.op(b"(")
        p.string("echo pwned")
        p.op(b"tR0")  # call, then POP it
    p.op(b".")
    return bytes(p.out)


def write_torch_zip(path: Path, tensors: dict[str, np.ndarray], evil_global: Optional[tuple[str, str]] = None, prologue: bytes = b"",
                    sizes: Optional[dict[str, list[Any]]] = None, deflate: frozenset[str] = frozenset()) -> None:
    """`deflate` names members ("data.pkl", "byteorder") to compress, which torch.save never does."""
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    archive = path.stem

    def packing(member: str) -> int:
        return zipfile.ZIP_DEFLATED if member in deflate else zipfile.ZIP_STORED

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{archive}/data.pkl", torch_pickle(tensors, evil_global, prologue, sizes), packing("data.pkl"))
        zf.writestr(f"{archive}/byteorder", "little", packing("byteorder"))
        for key, a in enumerate(tensors.values()):
            zf.writestr(f"{archive}/data/{key}", np.ascontiguousarray(a).tobytes())
        zf.writestr(f"{archive}/version", "3\n")


# ---------------------------------------------------------------- tokenizer


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _len_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2, _varint(len(payload)) + payload)


def tiny_vocab() -> tuple[list[str], list[float], list[int]]:
    """<unk> <s> </s>, the 256 byte pieces, then some words: 300 pieces, SentencePiece-style."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    words = ["▁", "e", "t", "a", "o", "n", "h", "l", "r", "s", "▁t", "he", "▁the", "▁a", "in", "▁o", "er", "an", "on", "re",
             "▁s", "at", "en", "nd", "▁w", "ll", "▁h", "▁he", "lo", "▁hello", "or", "▁wor", "ld", "▁world", "ou", "▁I",
             "it", "is", "▁is", "ar", "es"]
    pieces += words
    types += [1] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return pieces, scores, types


def write_sentencepiece_model(path: Path, pieces: list[str], scores: list[float], types: list[int]) -> None:
    body = bytearray()
    for piece, score, kind in zip(pieces, scores, types):
        sp = _len_field(1, piece.encode()) + _field(2, 5, struct.pack("<f", score)) + _field(3, 0, _varint(kind))
        body += _len_field(1, sp)
    trainer = _field(3, 0, _varint(2)) + _field(40, 0, _varint(0)) + _field(41, 0, _varint(1)) + _field(42, 0, _varint(2)) + _field(43, 0, _varint((1 << 64) - 1))
    body += _len_field(2, trainer)
    path.write_bytes(bytes(body))


def write_tokenizer_json(path: Path, pieces: list[str], merges: list[str]) -> None:
    data = {
        "version": "1.0",
        "added_tokens": [
            {"id": 0, "content": "<unk>", "special": True},
            {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True},
        ],
        "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": merges},
    }
    path.write_text(json.dumps(data), encoding="utf-8")


# ---------------------------------------------------------------- model folders


@dataclass
class TinyModel:
    folder: Path
    weights: dict[str, np.ndarray]  # HF names -> values as stored (after any BF16 rounding)
    config: dict[str, Any]
    predictor: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    predictor_dir: Optional[Path] = None


TINY_CONFIG = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, num_hidden_layers=2, vocab_size=300, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0)


def hf_weights(config: dict[str, Any], rng: np.random.Generator, dtype: Any = np.float32) -> dict[str, np.ndarray]:
    d, ff, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * d // config["num_attention_heads"]

    def m(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(dtype)

    w = {"model.embed_tokens.weight": m(v, d, 0.5), "model.norm.weight": (1 + 0.1 * rng.standard_normal(d)).astype(dtype), "lm_head.weight": m(v, d, 0.2)}
    for il in range(config["num_hidden_layers"]):
        p = f"model.layers.{il}."
        w[p + "input_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(dtype)
        w[p + "post_attention_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(dtype)
        w[p + "self_attn.q_proj.weight"] = m(d, d, 0.3)
        w[p + "self_attn.k_proj.weight"] = m(kv, d, 0.3)
        w[p + "self_attn.v_proj.weight"] = m(kv, d, 0.2)
        w[p + "self_attn.o_proj.weight"] = m(d, d, 0.2)
        w[p + "mlp.gate_proj.weight"] = m(ff, d, 0.2)
        w[p + "mlp.up_proj.weight"] = m(ff, d, 0.2)
        w[p + "mlp.down_proj.weight"] = m(d, ff, 0.2)
    return w


def make_model(
    folder: Path,
    *,
    hidden_act: str = "relu",
    fmt: str = "safetensors",
    dtype: Any = np.float32,
    shards: int = 1,
    tokenizer: str = "model",
    predictor: Optional[str] = "pt",
    rank: int = 32,
    seed: int = 0,
    extra_config: Optional[dict[str, Any]] = None,
) -> TinyModel:
    """fmt: safetensors, bf16 (safetensors BF16) or bin (torch zip); predictor: pt, safetensors,
    embedded or None."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    config: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": hidden_act, "bos_token_id": 1, "eos_token_id": 2, **TINY_CONFIG, **(extra_config or {})}
    (folder / "config.json").write_text(json.dumps(config))
    weights = hf_weights(config, rng, np.float16 if fmt != "bf16" and dtype == np.float16 else np.float32)
    if fmt == "bf16":
        weights = {k: bf16_round_trip(v) for k, v in weights.items()}

    tiny = TinyModel(folder, weights, config)
    pred_tensors: dict[str, np.ndarray] = {}
    if predictor is not None:
        d, ff = config["hidden_size"], config["intermediate_size"]
        for il in range(config["num_hidden_layers"]):
            fc1 = (rng.standard_normal((rank, d)) * 0.2).astype(np.float32)
            fc2 = (rng.standard_normal((ff, rank)) * 0.2).astype(np.float32)
            tiny.predictor[il] = (fc1, fc2)
            pred_tensors[f"model.layers.{il}.mlp.predictor.fc1.weight"] = fc1
            pred_tensors[f"model.layers.{il}.mlp.predictor.fc2.weight"] = fc2

    stored = dict(weights)
    if predictor == "embedded":
        stored.update(pred_tensors)
    _write_checkpoint(folder, stored, fmt, shards)
    if predictor in ("pt", "safetensors"):
        pdir = folder.parent / (folder.name + "-Predictor")
        pdir.mkdir(exist_ok=True)
        if predictor == "pt":
            for il, (fc1, fc2) in tiny.predictor.items():
                write_torch_zip(pdir / f"model_{il}.pt", {"fc1.weight": fc1, "fc2.weight": fc2})
        else:
            write_safetensors(pdir / "predictor.safetensors", pred_tensors)
        (pdir / "config.json").write_text(json.dumps({"sparse_threshold": 0.25}))
        tiny.predictor_dir = pdir

    pieces, scores, types = tiny_vocab()
    if tokenizer == "model":
        write_sentencepiece_model(folder / "tokenizer.model", pieces, scores, types)
    else:
        write_tokenizer_json(folder / "tokenizer.json", pieces, ["▁ t", "h e", "▁t he", "▁ a"])
    (folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": {"content": "</s>"}, "unk_token": "<unk>", "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}))
    return tiny


def _write_checkpoint(folder: Path, tensors: dict[str, np.ndarray], fmt: str, shards: int) -> None:
    names = list(tensors)
    ext = "bin" if fmt == "bin" else "safetensors"
    stem = "pytorch_model" if fmt == "bin" else "model"
    write = write_torch_zip if fmt == "bin" else (lambda p, t: write_safetensors(p, t, frozenset(t) if fmt == "bf16" else frozenset()))
    if shards == 1:
        write(folder / f"{stem}.{ext}", tensors)
        return
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        shard = f"{stem}-{s + 1:05}-of-{shards:05}.{ext}"
        write(folder / shard, {n: tensors[n] for n in part})
        weight_map.update({n: shard for n in part})
    (folder / f"{stem}.{ext}.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


# ---------------------------------------------------------------- GGUF reader


@dataclass
class GGUFFile:
    magic: bytes
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, tuple[int, tuple[int, ...], int]]  # name -> (ggml type, ne, absolute offset)
    data: bytes
    alignment: int

    def array(self, name: str) -> np.ndarray:
        kind, ne, off = self.tensors[name]
        dtype = {0: np.float32, 1: np.float16}[kind]
        n = int(np.prod(ne))
        return np.frombuffer(self.data, dtype, n, off).reshape(tuple(reversed(ne)))


def read_gguf(path: Path) -> GGUFFile:
    data = path.read_bytes()
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string() -> str:
        nonlocal pos
        n = take("Q")
        s = data[pos : pos + n].decode()
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(kind: int) -> Any:
        if kind == 8:
            return string()
        if kind == 9:
            elem, n = take("I"), take("Q")
            return [value(elem) for _ in range(n)]
        return take(scalar[kind])

    magic = data[:4]
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    metadata = {}
    for _ in range(n_kv):
        key = string()
        metadata[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        ne = tuple(take("Q") for _ in range(nd))
        infos.append((name, take("I"), ne, take("Q")))
    alignment = metadata.get("general.alignment", 32)
    start = pos + (-pos) % alignment
    tensors = {name: (kind, ne, start + off) for name, kind, ne, off in infos}
    return GGUFFile(magic, version, metadata, tensors, data, alignment)


# ---------------------------------------------------------------- reference forward pass


def reference_logits(w: dict[str, np.ndarray], config: dict[str, Any], tokens: list[int]) -> np.ndarray:
    """Hugging Face LlamaForCausalLM's last-token logits in float64 (rotate-half RoPE, GQA),
    for checking that the converted file computes the same function."""
    d, n_head, n_kv = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    hd, eps, theta = d // n_head, config["rms_norm_eps"], config.get("rope_theta", 10000.0)
    act = config["hidden_act"]
    f = {k: v.astype(np.float64) for k, v in w.items()}

    def norm(x: np.ndarray, g: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def rope(x: np.ndarray) -> np.ndarray:  # x [heads, T, hd]
        inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
        ang = np.arange(x.shape[1])[:, None] * inv[None, :]
        cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
        rot = np.concatenate([-x[..., hd // 2 :], x[..., : hd // 2]], -1)
        return x * cos + rot * sin

    def activation(g: np.ndarray) -> np.ndarray:
        if act == "relu":
            return np.maximum(g, 0)
        return g / (1 + np.exp(-g))

    x = f["model.embed_tokens.weight"][tokens]
    T = len(tokens)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for il in range(config["num_hidden_layers"]):
        p = f"model.layers.{il}."
        h = norm(x, f[p + "input_layernorm.weight"])
        q = rope((h @ f[p + "self_attn.q_proj.weight"].T).reshape(T, n_head, hd).transpose(1, 0, 2))
        k = rope((h @ f[p + "self_attn.k_proj.weight"].T).reshape(T, n_kv, hd).transpose(1, 0, 2))
        v = (h @ f[p + "self_attn.v_proj.weight"].T).reshape(T, n_kv, hd).transpose(1, 0, 2)
        group = n_head // n_kv
        k, v = np.repeat(k, group, 0), np.repeat(v, group, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        attn = (s @ v).transpose(1, 0, 2).reshape(T, d)
        x = x + attn @ f[p + "self_attn.o_proj.weight"].T
        h = norm(x, f[p + "post_attention_layernorm.weight"])
        ff = activation(h @ f[p + "mlp.gate_proj.weight"].T) * (h @ f[p + "mlp.up_proj.weight"].T)
        x = x + ff @ f[p + "mlp.down_proj.weight"].T
    x = norm(x, f["model.norm.weight"])
    return (x @ f["lm_head.weight"].T)[-1]


# ---------------------------------------------------------------- Falcon and OPT goldens

# Written by scripts/make_convert_goldens.py with torch and transformers (docs/converter.md).
GOLDENS = Path(__file__).resolve().parent / "data" / "convert-goldens"
GOLDEN_NAMES = ("falcon-mq", "falcon-gqa", "opt")


@dataclass
class Golden:
    name: str
    folder: Path
    predictor_dir: Path
    config: dict[str, Any]
    weights: dict[str, np.ndarray]  # the checkpoint's tensors, as float32
    predictor: dict[int, tuple[np.ndarray, np.ndarray]]
    tokens: list[int]
    logits: np.ndarray  # transformers' float32 [len(tokens), n_vocab]
    tokenized: dict[str, list[int]]  # transformers' ids for some strings (no special tokens)


def load_golden(name: str) -> Golden:
    from fixture_files import read_safetensors, read_torch_state_dict

    folder = GOLDENS / name
    pdir = GOLDENS / f"{name}-Predictor"
    config = json.loads((folder / "config.json").read_text())
    golden = json.loads((folder / "golden.json").read_text())
    weights = {k: v.astype(np.float32) for k, v in read_safetensors(folder / "model.safetensors").items()}
    predictor = {}
    for il in range(config["num_hidden_layers"]):
        sd = read_torch_state_dict(pdir / f"model_{il}.pt")
        predictor[il] = (sd["fc1.weight"], sd["fc2.weight"])
    logits = np.load(folder / golden["logits"])
    return Golden(name, folder, pdir, config, weights, predictor, golden["tokens"], logits, golden["tokenized"])


def copy_golden(name: str, dest: Path) -> Golden:
    """The golden's folders copied under dest (for tests that edit them)."""
    import shutil

    g = load_golden(name)
    folder, pdir = dest / name, dest / f"{name}-Predictor"
    shutil.copytree(g.folder, folder)
    shutil.copytree(g.predictor_dir, pdir)
    g.folder, g.predictor_dir = folder, pdir
    return g


def hf_falcon_heads(w: np.ndarray, n_head: int, n_kv: int, head_dim: int, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hugging Face FalconAttention._split_heads applied to the rows of query_key_value: the rows
    of each query head's Q, K and V, [n_head, head_dim, n_embd] each (K and V broadcast to the
    query heads that share them). variant: "new" (new_decoder_architecture), "mq" (multi_query)
    or "mha" (neither)."""
    d = w.shape[1]
    if variant == "new":
        g = w.reshape(n_kv, n_head // n_kv + 2, head_dim, d)
        rep = n_head // n_kv
        return g[:, :-2].reshape(n_head, head_dim, d), np.repeat(g[:, -2], rep, 0), np.repeat(g[:, -1], rep, 0)
    if variant == "mq":
        g = w.reshape(n_head + 2, head_dim, d)
        return g[:-2], np.repeat(g[-2:-1], n_head, 0), np.repeat(g[-1:], n_head, 0)
    g = w.reshape(n_head, 3, head_dim, d)
    return g[:, 0], g[:, 1], g[:, 2]


def engine_falcon_heads(qkv: np.ndarray, n_head: int, n_kv: int, head_dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The engine's reading of attn_qkv (docs/forward-pass.md): all Q heads, all K heads, all V
    heads; query head h uses KV head h // (n_head / n_kv). Same shapes as hf_falcon_heads."""
    d = qkv.shape[1]
    q_rows, kv_rows = n_head * head_dim, n_kv * head_dim
    q = qkv[:q_rows].reshape(n_head, head_dim, d)
    group = np.arange(n_head) // (n_head // n_kv)
    k = qkv[q_rows : q_rows + kv_rows].reshape(n_kv, head_dim, d)[group]
    v = qkv[q_rows + kv_rows :].reshape(n_kv, head_dim, d)[group]
    return q, k, v


def make_falcon_folder(folder: Path, config: dict[str, Any], seed: int = 0, tokenizer_from: str = "falcon-mq") -> dict[str, np.ndarray]:
    """A Falcon folder built here with NumPy (any variant, weights F32), with the golden's
    tokenizer files; returns the weights."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    d, n_head, n_layer = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
    hd = d // n_head
    new = config.get("new_decoder_architecture", False)
    n_kv = config.get("num_kv_heads", n_head) if new else (1 if config.get("multi_query", True) else n_head)
    ff = config.get("ffn_hidden_size") or 4 * d
    v = config["vocab_size"]

    def m(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w = {"transformer.word_embeddings.weight": m(v, d), "transformer.ln_f.weight": 1 + m(d), "transformer.ln_f.bias": m(d)}
    for il in range(n_layer):
        p = f"transformer.h.{il}."
        for norm in ("ln_attn", "ln_mlp") if new and config.get("num_ln_in_parallel_attn") != 1 else ("input_layernorm",):
            w[f"{p}{norm}.weight"], w[f"{p}{norm}.bias"] = 1 + m(d), m(d)
        w[p + "self_attention.query_key_value.weight"] = m((n_head + 2 * n_kv) * hd, d)
        w[p + "self_attention.dense.weight"] = m(d, d)
        w[p + "mlp.dense_h_to_4h.weight"] = m(ff, d)
        w[p + "mlp.dense_4h_to_h.weight"] = m(d, ff)
    if not config.get("tie_word_embeddings", True):
        w["lm_head.weight"] = m(v, d)
    write_safetensors(folder / "model.safetensors", w)
    (folder / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(GOLDENS / tokenizer_from / name, folder / name)
    return w


def gguf_forward(path: Path, tokens: list[int]) -> np.ndarray:
    """Logits [len(tokens), n_vocab] of a converted falcon or opt file, computed in float64 from
    its tensors exactly as docs/forward-pass.md says the engine reads them ("Falcon and OPT"),
    every FFN neuron active (a sparse file's ffn_down_t with its bias). Independent of the
    converter's code: it checks that the file means what the engine computes."""
    g = read_gguf(path)
    m, arch = g.metadata, g.metadata["general.architecture"]
    n_head, n_kv = m[f"{arch}.attention.head_count"], m[f"{arch}.attention.head_count_kv"]
    eps = m[f"{arch}.attention.layer_norm_epsilon"]
    t = {name: g.array(name).astype(np.float64) for name in g.tensors}
    T, d = len(tokens), m[f"{arch}.embedding_length"]
    hd = d // n_head

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * t[name + ".weight"] + t.get(name + ".bias", 0.0)

    def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:  # [T, heads, hd]
        group = np.arange(n_head) // (n_head // n_kv)
        k, v = k[:, group], v[:, group]
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        return np.einsum("hqk,khd->qhd", s, v).reshape(T, d)

    def neox(x: np.ndarray) -> np.ndarray:  # [T, heads, hd]: pairs (j, j + hd/2)
        half = hd // 2
        theta = np.arange(T)[:, None] * m[f"{arch}.rope.freq_base"] ** (-2.0 * np.arange(half) / hd)[None, :]
        cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1)

    def ffn(x: np.ndarray, blk: str) -> np.ndarray:
        a = np.maximum(x @ t[blk + "ffn_up.weight"].T + t.get(blk + "ffn_up.bias", 0.0), 0)
        if blk + "ffn_down.weight" in t:
            return a @ t[blk + "ffn_down.weight"].T + t.get(blk + "ffn_down.bias", 0.0)
        return a @ t[blk + "ffn_down_t.weight"] + t.get(blk + "ffn_down_t.bias", 0.0)

    h = t["token_embd.weight"][tokens]
    if arch == "opt":
        h = h + t["position_embd.weight"][np.arange(T) + 2]
    for il in range(m[f"{arch}.block_count"]):
        blk = f"blk.{il}."
        if arch == "falcon":
            an = norm(h, blk + "attn_norm")
            ac = norm(h, blk + "attn_norm_2") if blk + "attn_norm_2.weight" in t else an
            qkv = ac @ t[blk + "attn_qkv.weight"].T
            q = neox(qkv[:, :d].reshape(T, n_head, hd))
            k = neox(qkv[:, d : d + n_kv * hd].reshape(T, n_kv, hd))
            v = qkv[:, d + n_kv * hd :].reshape(T, n_kv, hd)
            h = h + attention(q, k, v) @ t[blk + "attn_output.weight"].T + ffn(an, blk)
        else:
            a = norm(h, blk + "attn_norm")
            q, k, v = (a @ t[f"{blk}attn_{x}.weight"].T + t[f"{blk}attn_{x}.bias"] for x in "qkv")
            att = attention(q.reshape(T, n_head, hd), k.reshape(T, n_kv, hd), v.reshape(T, n_kv, hd))
            h = h + att @ t[blk + "attn_output.weight"].T + t[blk + "attn_output.bias"]
            h = h + ffn(norm(h, blk + "ffn_norm"), blk)
    out = t["output.weight"] if "output.weight" in t else t["token_embd.weight"]
    return norm(h, "output_norm") @ out.T
