#!/usr/bin/env python3
"""Trains the really-trained fixture: a small ReLU-Llama (ReGLU FFN, grouped-query attention, a
SentencePiece BPE vocabulary of its own) on the King James Bible, and records goldens with
transformers. Hand-run (torch, transformers, sentencepiece), never in CI; see docs/fixture.md.

    python scripts/train-fixture.py --out tests/data/relu-llama-kjv --minutes 25
    python scripts/train-fixture.py --out tests/data/relu-llama-kjv --goldens-only
    python scripts/train-fixture.py --out tests/data/relu-llama-kjv --write-train-text kjv-train.txt
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

from fixture import corpus, goldens, model as fixture_model, train, vocab  # noqa: E402

VOCAB_SIZE = 4096
SEQ = 256


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_model(args, out: Path, train_text: str) -> dict:
    sp = vocab.train(train_text, VOCAB_SIZE)
    vocab.save(sp, out, max_length=512)
    stream = torch.tensor([sp.bos_id()] + sp.encode(train_text), dtype=torch.long)
    log(f"vocabulary {sp.get_piece_size()}, training stream {stream.numel()} tokens")
    seed_everything(args.seed)
    model = fixture_model.build(sp.get_piece_size())
    log(f"{sum(p.numel() for p in model.parameters())} parameters")
    model.train()
    record = train.run(model, stream, bos=sp.bos_id(), seq=SEQ, batch=args.batch, steps=args.steps,
                       minutes=args.minutes, lr=args.lr, l1=args.l1, seed=args.seed, log=log)
    record["train_tokens"] = stream.numel()
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    add_legacy_config_keys(out / "config.json")
    return record


def add_legacy_config_keys(path: Path) -> None:
    """transformers 5 writes "dtype" and "rope_parameters"; older readers (transformers 4,
    PowerInfer's converters) look for "torch_dtype" and "rope_theta"."""
    config = json.loads(path.read_text())
    config.setdefault("torch_dtype", config.get("dtype", "float16"))
    config.setdefault("rope_theta", config.get("rope_parameters", {}).get("rope_theta", 10000.0))
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def evaluate(out: Path, val_text: str, record: dict) -> None:
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    # the F16 weights as saved, upcast: what an F32 conversion of the F16 file holds
    model = LlamaForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    val_ids = [sp.bos_id()] + sp.encode(val_text)
    record["val_tokens"] = len(val_ids)
    record["val_loss"] = round(goldens.mean_loss(model, val_ids, SEQ, sp.bos_id()), 4)
    record["val_perplexity_llama_cpp"] = goldens.perplexity(model, val_ids, SEQ, sp.bos_id())
    log(f"val loss {record['val_loss']}, perplexity (n_ctx {SEQ}) "
        f"{record['val_perplexity_llama_cpp']['ppl']:.4f}")
    cases = [goldens.greedy(model, sp, p, n_new=24) for p in goldens.PROMPTS]
    for c in cases:
        log(f"{c['prompt']!r} -> {c['continuation_text']!r}")
    (out / "goldens.json").write_text(json.dumps({
        "computed_with": "transformers float32 (eager attention) from the F16 safetensors, upcast",
        "top_k": 5,
        "cases": cases,
    }, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="Hugging Face folder to write")
    ap.add_argument("--minutes", type=float, default=25.0, help="training wall-time budget")
    ap.add_argument("--steps", type=int, help="exact step count (overrides --minutes; reproducible)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--l1", type=float, default=0.05, help="L1 weight on the gate activations")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--goldens-only", action="store_true",
                    help="recompute the goldens and perplexity of an already trained --out")
    ap.add_argument("--write-train-text", type=Path, metavar="FILE",
                    help="only write the training text (the predictor trainer's corpus) to FILE")
    args = ap.parse_args()
    train_text, val_text = corpus.train_and_validation()
    if args.write_train_text:
        args.write_train_text.write_text(train_text)
        return
    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    val_file = args.out.parent / (args.out.name + ".validation.txt")
    val_file.write_text(val_text)
    log(f"training text {len(train_text)} chars; validation ({', '.join(corpus.VALIDATION_BOOKS)}) "
        f"{len(val_text)} chars -> {val_file}")
    record_file = args.out / "training.json"
    if args.goldens_only:
        record = json.loads(record_file.read_text())
    else:
        record = train_model(args, args.out, train_text)
        record["validation_books"] = list(corpus.VALIDATION_BOOKS)
    evaluate(args.out, val_text, record)
    record_file.write_text(json.dumps(record, indent=1) + "\n")
    log(f"done: {json.dumps(record)}")


if __name__ == "__main__":
    main()
