#!/usr/bin/env python3
"""Writes the converter's golden checkpoints: small randomly initialised Hugging Face models of
each family the converter takes beyond Llama, with what transformers computes for them, into
bindings/python/tests/data/convert-goldens/ (docs/converter.md, "Golden checkpoints").

Hand-run only; CI never runs it and needs neither torch nor transformers (the tests read the
committed files). It needs a Python with torch (CPU is enough) and transformers, e.g.

    python3 -m venv /work/torchvenv
    /work/torchvenv/bin/pip install torch transformers      # or torch from the CPU wheel index
    /work/torchvenv/bin/python scripts/make_convert_goldens.py

For each model, in <name>/:
  config.json, model.safetensors (F16, as save_pretrained writes it), tokenizer.json,
  tokenizer_config.json   the Hugging Face folder;
  golden.json   the token ids, per-position logits file, and transformers' tokenization of a
                few strings (fast tokenizer, no special tokens added unless noted);
  logits.npy    float32 [T, n_vocab]: transformers' logits for those ids, computed in float32 from
                the F16-rounded weights that the checkpoint holds;
and <name>-Predictor/: model_<L>.pt (torch.save of a bias-free fc1 [r, n_embd], fc2 [n_ff, r])
and config.json with sparse_threshold, as PowerInfer's predictor folders are.

Models (hidden 64, 2 layers, ReLU, a byte-level BPE of 320 pieces trained here):
  falcon-mq   FalconForCausalLM, 7B-style: multi_query (one KV head), one input_layernorm,
              parallel block, ffn 4*hidden, tied output;
  falcon-gqa  FalconForCausalLM, 40B-style: new_decoder_architecture, 8 heads in 2 KV groups,
              ln_attn + ln_mlp, ffn_hidden_size 128, untied lm_head;
  opt         OPTForCausalLM: 4 heads, ffn_dim 128, 64 positions, vocab_size 328 (8 padding
              rows past the tokenizer), tied output, "</s>" put first by the post-processor.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import FalconConfig, FalconForCausalLM, OPTConfig, OPTForCausalLM, PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bindings" / "python" / "tests" / "data" / "convert-goldens"
N_VOCAB_TOKENIZER = 320
RANK = 16
TOKEN_TEXT = "In the beginning 1234 things, said she: hello world!"
TOKENIZE_STRINGS = ["Hello world", " Hello  world!\n\n", "2024-12-03: 12345 apples", "it's the end.", "ünïcödé €"]

CORPUS = [
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "Hello world! Hello, hello world. The world is wide; the world is old.",
    "She said: it's 1234 or 5678, isn't it? They'll see 42 things, we've 99 more.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 12345 and the end.",
    "things that are said and done, again and again, in the beginning and at the end.",
]


def train_tokenizer(falcon: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if falcon:
        # Falcon's split (llama.cpp's "falcon" pre-tokenizer): punctuation runs, the GPT-2 regex,
        # digit runs, then digit groups of three.
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Punctuation("contiguous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), "isolated"),
        ])
        specials = [">>TITLE<<", ">>ABSTRACT<<", ">>COMMENT<<", "<|endoftext|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=N_VOCAB_TOKENIZER, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if falcon:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        tok.post_processor = processors.TemplateProcessing(single="</s> $A", pair="</s> $A </s> $B", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    assert tok.get_vocab_size() == N_VOCAB_TOKENIZER, tok.get_vocab_size()
    return tok


def fast_tokenizer(tok: Tokenizer, falcon: bool) -> PreTrainedTokenizerFast:
    if falcon:
        return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="</s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


def randomise(model: torch.nn.Module, seed: int) -> None:
    """Weights large enough that every block changes the logits, rounded to F16 (the checkpoint's
    type), norms around 1 with non-zero biases."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(("ln_f.weight", "ln_attn.weight", "ln_mlp.weight")):
                value = 1 + 0.1 * torch.randn(p.shape, generator=g) if name.endswith("weight") else 0.1 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                value = 0.1 * torch.randn(p.shape, generator=g)
            else:
                value = torch.randn(p.shape, generator=g) * (0.5 if "embed" in name else 1.0 / p.shape[-1] ** 0.5 * 1.5)
            p.copy_(value.half().float())


def predictor(folder: Path, n_layer: int, n_embd: int, n_ff: int, seed: int) -> None:
    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(seed)
    for il in range(n_layer):
        fc1 = torch.randn((RANK, n_embd), generator=g) * 0.2
        fc2 = torch.randn((n_ff, RANK), generator=g) * 0.2
        torch.save({"fc1.weight": fc1, "fc2.weight": fc2}, folder / f"model_{il}.pt")
    (folder / "config.json").write_text(json.dumps({"sparse_threshold": 0.0}) + "\n")


def write_model(name: str, model: torch.nn.Module, tok: Tokenizer, falcon: bool, seed: int) -> None:
    folder = OUT / name
    model.eval()
    randomise(model, seed)
    hf_tok = fast_tokenizer(tok, falcon)
    ids = hf_tok(TOKEN_TEXT, add_special_tokens=not falcon)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)).logits[0].float().numpy()
    model.half().save_pretrained(folder, safe_serialization=True)
    hf_tok.save_pretrained(folder)
    for extra in ("generation_config.json",):
        (folder / extra).unlink(missing_ok=True)
    np.save(folder / "logits.npy", logits.astype(np.float32))
    tokenized = {s: hf_tok(s, add_special_tokens=False)["input_ids"] for s in TOKENIZE_STRINGS}
    golden = {"tokens": ids, "text": TOKEN_TEXT, "logits": "logits.npy", "tokenized": tokenized, "transformers": __import__("transformers").__version__, "torch": torch.__version__}
    (folder / "golden.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    c = model.config
    n_ff = getattr(c, "ffn_hidden_size", None) or getattr(c, "ffn_dim", None) or 4 * c.hidden_size
    predictor(OUT / f"{name}-Predictor", c.num_hidden_layers, c.hidden_size, n_ff, seed + 100)
    print(f"{name}: {len(ids)} tokens, max |logit| {np.abs(logits).max():.3f}", file=sys.stderr)


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    torch.manual_seed(0)
    falcon_tok, opt_tok = train_tokenizer(True), train_tokenizer(False)
    eos = falcon_tok.token_to_id("<|endoftext|>")
    common = dict(vocab_size=N_VOCAB_TOKENIZER, hidden_size=64, num_hidden_layers=2, activation="relu", bias=False, alibi=False, parallel_attn=True,
                  max_position_embeddings=128, bos_token_id=eos, eos_token_id=eos, attn_implementation="eager")
    mq = FalconConfig(num_attention_heads=4, multi_query=True, new_decoder_architecture=False, tie_word_embeddings=True, **common)
    write_model("falcon-mq", FalconForCausalLM(mq), falcon_tok, True, 1)
    gqa = FalconConfig(num_attention_heads=8, num_kv_heads=2, new_decoder_architecture=True, ffn_hidden_size=128, tie_word_embeddings=False, **common)
    write_model("falcon-gqa", FalconForCausalLM(gqa), falcon_tok, True, 2)
    opt = OPTConfig(vocab_size=N_VOCAB_TOKENIZER + 8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, max_position_embeddings=64,
                    word_embed_proj_dim=64, do_layer_norm_before=True, activation_function="relu", bos_token_id=2, eos_token_id=2, pad_token_id=1,
                    tie_word_embeddings=True, attn_implementation="eager")
    write_model("opt", OPTForCausalLM(opt), opt_tok, False, 3)
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{OUT}: {total / 1e6:.2f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
