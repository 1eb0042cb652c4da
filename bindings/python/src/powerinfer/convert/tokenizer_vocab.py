"""The vocabulary of a model folder as GGUF tokenizer.* metadata (docs/file-format.md): for llama
and bamboo from tokenizer.model (SentencePiece), else from tokenizer.json (a SentencePiece-style
BPE with byte fallback, or a Unigram model); for falcon and opt the byte-level BPE of
bpe_vocab.py. Special token ids, add_bos/add_eos and the chat template come from
tokenizer_config.json, special_tokens_map.json and config.json (vocab_common.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .bpe_vocab import read_byte_level_vocab
from .errors import ConvertError
from .model_spec import ModelSpec
from .sentencepiece_model import read_sentencepiece_model
from .vocab_common import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, Vocab, json_file, pieces_by_id, read_specials

__all__ = ["Vocab", "read_vocab"]

BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


def read_vocab(folder: Path, spec: ModelSpec) -> Vocab:
    if spec.arch in ("falcon", "opt"):
        return read_byte_level_vocab(folder, spec)
    if (folder / "tokenizer.model").is_file():
        vocab = _from_sentencepiece(folder / "tokenizer.model")
        _append_added_tokens(folder, vocab)
    elif (folder / "tokenizer.json").is_file():
        vocab = _from_tokenizer_json(folder / "tokenizer.json")
    else:
        raise ConvertError(folder, "has neither tokenizer.model nor tokenizer.json")
    _pad_to(vocab, spec.n_vocab)
    read_specials(folder, spec, vocab)
    return vocab


def _from_sentencepiece(path: Path) -> Vocab:
    m = read_sentencepiece_model(path)
    return Vocab(m.pieces, m.scores, m.types, dict(m.special_ids), source=path)


def _append_added_tokens(folder: Path, vocab: Vocab) -> None:
    """Tokens that added_tokens.json or tokenizer.json add beyond the SentencePiece pieces."""
    added: dict[str, int] = {}
    special: set[str] = set()
    if (folder / "added_tokens.json").is_file():
        data = json_file(folder / "added_tokens.json")
        if isinstance(data, dict):
            added.update({k: v for k, v in data.items() if isinstance(v, int)})
    if (folder / "tokenizer.json").is_file():
        data = json_file(folder / "tokenizer.json")
        for t in (data.get("added_tokens") if isinstance(data, dict) else None) or []:
            if isinstance(t, dict) and isinstance(t.get("id"), int) and isinstance(t.get("content"), str):
                added.setdefault(t["content"], t["id"])
                if t.get("special"):
                    special.add(t["content"])
    extra = sorted((i, text) for text, i in added.items() if i >= len(vocab.tokens))
    for i, text in extra:
        if i != len(vocab.tokens):
            raise ConvertError(folder / "added_tokens.json", f"added token {text!r} has id {i}, but the next free id is {len(vocab.tokens)}")
        vocab.tokens.append(text)
        vocab.scores.append(-1000.0)
        vocab.types.append(CONTROL if text in special else USER_DEFINED)


def _from_tokenizer_json(path: Path) -> Vocab:
    data = json_file(path)
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise ConvertError(path, "has no model section")
    kind = model.get("type")
    if kind == "BPE":
        if not model.get("byte_fallback"):
            raise ConvertError(path, "is a byte-level (GPT-2 style) BPE vocabulary; for llama and bamboo models the engine reads SentencePiece-style vocabularies only (BPE with byte_fallback, or tokenizer.model)", "model.type")
        vocab = _bpe_vocab(path, model)
    elif kind == "Unigram":
        vocab = _unigram_vocab(path, model)
    else:
        raise ConvertError(path, f"tokenizer model type {kind!r} is not BPE or Unigram", "model.type")
    for t in data.get("added_tokens", []) or []:
        if not (isinstance(t, dict) and isinstance(t.get("id"), int) and isinstance(t.get("content"), str)):
            continue
        i, text = t["id"], t["content"]
        if i == len(vocab.tokens):
            vocab.tokens.append(text)
            vocab.scores.append(-1000.0)
            vocab.types.append(NORMAL)
        elif i > len(vocab.tokens):
            raise ConvertError(path, f"added token {text!r} has id {i}, but the next free id is {len(vocab.tokens)}", "added_tokens")
        if vocab.tokens[i] == text and vocab.types[i] not in (UNKNOWN, BYTE):
            vocab.types[i] = CONTROL if t.get("special") else USER_DEFINED
    return vocab


def _bpe_vocab(path: Path, model: dict[str, Any]) -> Vocab:
    pieces = pieces_by_id(path, model.get("vocab"))
    # The SPM merge loop joins the pair whose result scores highest, so a merged piece scores
    # minus the rank of the first merge that makes it; pieces no merge makes (characters, bytes,
    # specials) score below all of them.
    rank: dict[str, int] = {}
    merges = model.get("merges") or []
    if not isinstance(merges, list):
        raise ConvertError(path, "BPE merges is not a list", "model.merges")
    for r, merge in enumerate(merges):
        pair = merge if isinstance(merge, list) else merge.split(" ", 1) if isinstance(merge, str) else None
        if pair is None or len(pair) != 2 or not all(isinstance(p, str) for p in pair):
            raise ConvertError(path, f"merge {r} is {merge!r:.60}, not 'left right' or [left, right]", "model.merges")
        rank.setdefault(pair[0] + pair[1], r)
    n_merges = len(merges)
    scores = [float(-rank[p]) if p in rank else float(-(n_merges + i)) for i, p in enumerate(pieces)]
    types = [BYTE if BYTE_PIECE.match(p) else NORMAL for p in pieces]
    unk = model.get("unk_token")
    ids = {p: i for i, p in enumerate(pieces)}
    if isinstance(unk, str) and unk in ids:
        types[ids[unk]] = UNKNOWN
    return Vocab(pieces, scores, types, {"unk": ids.get(unk) if isinstance(unk, str) else None}, source=path)


def _unigram_vocab(path: Path, model: dict[str, Any]) -> Vocab:
    entries = model.get("vocab")
    if not isinstance(entries, list) or not entries:
        raise ConvertError(path, "Unigram model has no vocab list", "model.vocab")
    for i, e in enumerate(entries):
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], (int, float)) and not isinstance(e[1], bool)):
            raise ConvertError(path, f"Unigram entry {i} is {e!r:.60}, not [piece, score]", "model.vocab")
    pieces = [e[0] for e in entries]
    scores = [float(e[1]) for e in entries]
    types = [BYTE if BYTE_PIECE.match(p) else NORMAL for p in pieces]
    unk = model.get("unk_id")
    if unk is not None:
        if type(unk) is not int or not 0 <= unk < len(pieces):
            raise ConvertError(path, f"unk_id {unk!r:.20} is not a piece id in 0..{len(pieces) - 1}", "model.unk_id")
        types[unk] = UNKNOWN
    return Vocab(pieces, scores, types, {"unk": unk}, source=path)


def _pad_to(vocab: Vocab, n_vocab: int) -> None:
    """Embedding matrices are often padded past the tokenizer (to a multiple of 64 or so)."""
    if len(vocab.tokens) > n_vocab:
        raise ConvertError(vocab.source, f"has {len(vocab.tokens)} tokens but config.json's vocab_size is {n_vocab}")
    for i in range(len(vocab.tokens), n_vocab):
        vocab.tokens.append(f"<dummy{i:05}>")
        vocab.scores.append(-1000.0)
        vocab.types.append(UNUSED)
