#!/usr/bin/env python3
"""powerinfer-convert throughput on a synthetic 1.1B-parameter checkpoint (TinyLlama's shape:
n_embd 2048, 22 layers, n_ff 5632, 32 heads, 4 KV heads, vocab 32000), F16 safetensors in two
shards with their index, random weights, plus a random rank-256 predictor (safetensors).

Prints the MB/s of tensor data written for an F16 sparse conversion (the issue's target is
>= 200 MB/s) and the conversion's peak RSS. The conversion runs in a child process, so
ru_maxrss is the converter's alone; the checkpoint was just written, so it is read from the page
cache (the number measures the converter, not the disk); its write-back is finished (sync)
before the clock starts. The output is fsynced before the clock stops. Needs about 4.5 GB free in the temporary folder; everything is deleted afterwards.

    python bench/convert_bench.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_EMBD, N_LAYER, N_FF, N_HEAD, N_HEAD_KV, N_VOCAB, RANK = 2048, 22, 5632, 32, 4, 32000, 256


def model_shapes() -> dict[str, tuple[int, ...]]:
    kv = N_HEAD_KV * N_EMBD // N_HEAD
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (N_VOCAB, N_EMBD)}
    for il in range(N_LAYER):
        p = f"model.layers.{il}."
        shapes.update({
            p + "input_layernorm.weight": (N_EMBD,),
            p + "self_attn.q_proj.weight": (N_EMBD, N_EMBD),
            p + "self_attn.k_proj.weight": (kv, N_EMBD),
            p + "self_attn.v_proj.weight": (kv, N_EMBD),
            p + "self_attn.o_proj.weight": (N_EMBD, N_EMBD),
            p + "post_attention_layernorm.weight": (N_EMBD,),
            p + "mlp.gate_proj.weight": (N_FF, N_EMBD),
            p + "mlp.up_proj.weight": (N_FF, N_EMBD),
            p + "mlp.down_proj.weight": (N_EMBD, N_FF),
        })
    shapes["model.norm.weight"] = (N_EMBD,)
    shapes["lm_head.weight"] = (N_VOCAB, N_EMBD)
    return shapes


def predictor_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for il in range(N_LAYER):
        shapes[f"model.layers.{il}.mlp.predictor.fc1.weight"] = (RANK, N_EMBD)
        shapes[f"model.layers.{il}.mlp.predictor.fc2.weight"] = (N_FF, RANK)
    return shapes


def write_safetensors(path: Path, shapes: dict[str, tuple[int, ...]], rng: np.random.Generator) -> None:
    """Header first, then each tensor generated and written in turn (never all in memory)."""
    header, at = {}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header).encode()
    raw += b" " * ((-len(raw)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for shape in shapes.values():
            rows = shape[0]
            step = max(1, (8 << 20) // int(np.prod(shape[1:], dtype=np.int64) or 1))
            for r in range(0, rows, step):
                block = (rng.standard_normal((min(step, rows - r), *shape[1:]), dtype=np.float32) * 0.02).astype(np.float16)
                f.write(block.tobytes())


def make_checkpoint(root: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    model, pred = root / "TinyLlama-1.1B-relu", root / "TinyLlama-1.1B-relu-Predictor"
    model.mkdir()
    pred.mkdir()
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "relu",
        "hidden_size": N_EMBD, "intermediate_size": N_FF, "num_hidden_layers": N_LAYER,
        "num_attention_heads": N_HEAD, "num_key_value_heads": N_HEAD_KV, "vocab_size": N_VOCAB,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "bos_token_id": 1, "eos_token_id": 2,
    }
    (model / "config.json").write_text(json.dumps(config))
    names = list(model_shapes().items())
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:])):
        shard = f"model-{i + 1:05}-of-00002.safetensors"
        write_safetensors(model / shard, dict(part), rng)
        weight_map.update({n: shard for n, _ in part})
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [f"▁w{i}" for i in range(N_VOCAB - len(pieces))]
    tokenizer = {
        "added_tokens": [{"id": i, "content": p, "special": True} for i, p in enumerate(pieces[:3])],
        "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": []},
    }
    (model / "tokenizer.json").write_text(json.dumps(tokenizer))
    write_safetensors(pred / "predictor.safetensors", predictor_shapes(), rng)
    return model, pred


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="make the checkpoint here and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="convert-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        model, pred = make_checkpoint(root)
        # The checkpoint's own write-back would otherwise compete with the conversion's.
        os.sync()
        print(f"synthetic checkpoint written in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        out = root / "bench.powerinfer.gguf"
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "powerinfer.convert", "--quiet", "--outtype", "f16", "--outfile", str(out), str(model), str(pred)], check=True, stdout=subprocess.DEVNULL)
        seconds = time.monotonic() - start
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        shapes = {**model_shapes(), **predictor_shapes()}
        tensor_mb = sum(int(np.prod(s)) * (2 if len(s) == 2 else 4) for s in shapes.values()) / 1e6
        print(f"wrote {tensor_mb:.0f} MB of F16 sparse tensors ({out.stat().st_size / 1e6:.0f} MB file) in {seconds:.2f} s: {tensor_mb / seconds:.0f} MB/s; peak RSS {rss_mb:.0f} MB")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
