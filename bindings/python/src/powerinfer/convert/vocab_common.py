"""The vocabulary as the converter holds it (Vocab), and what both kinds of tokenizer folder
share: token types, JSON files, a vocab map's pieces in id order, and the special ids,
add_bos/add_eos and chat templates from tokenizer_config.json, special_tokens_map.json and
config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .errors import ConvertError
from .model_spec import ModelSpec

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPECIAL_KEYS = ("bos", "eos", "unk", "pad")


@dataclass
class Vocab:
    tokens: list[str]
    scores: list[float]  # SentencePiece-style only; empty for byte-level BPE
    types: list[int]
    special_ids: dict[str, Optional[int]] = field(default_factory=dict)
    add_bos: Optional[bool] = None
    add_eos: Optional[bool] = None
    chat_templates: dict[str, str] = field(default_factory=dict)  # "" = the default template
    source: Optional[Path] = None
    model: str = "llama"  # tokenizer.ggml.model: "llama" (SentencePiece-style) or "gpt2" (byte-level BPE)
    pre: Optional[str] = None  # tokenizer.ggml.pre: the byte-level pre-tokenizer's split
    merges: Optional[list[str]] = None  # byte-level BPE: "left right", by rank


def pieces_by_id(path: Path, vocab: Any) -> list[str]:
    if not isinstance(vocab, dict) or not vocab:
        raise ConvertError(path, "BPE model has no vocab", "model.vocab")
    pieces: list[Optional[str]] = [None] * len(vocab)
    for piece, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < len(vocab) or pieces[i] is not None:
            raise ConvertError(path, f"token ids are not 0..{len(vocab) - 1} each once (see {piece!r})", "model.vocab")
        pieces[i] = piece
    return pieces  # type: ignore[return-value]


def read_specials(folder: Path, spec: ModelSpec, vocab: Vocab) -> None:
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    from_config = {"bos": spec.bos_token_id, "eos": spec.eos_token_id, "pad": spec.pad_token_id}
    tok_config = json_file(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    special_map = json_file(folder / "special_tokens_map.json") if (folder / "special_tokens_map.json").is_file() else {}
    for key in SPECIAL_KEYS:
        # A token named by the tokenizer files wins over config.json's id, which wins over the
        # SentencePiece trainer's default.
        for source in (tok_config, special_map):
            text = token_text(source.get(f"{key}_token")) if isinstance(source, dict) else None
            if text is not None and text in ids:
                vocab.special_ids[key] = ids[text]
                break
        else:
            if from_config.get(key) is not None and from_config[key] < len(vocab.tokens):
                vocab.special_ids[key] = from_config[key]
    if isinstance(tok_config, dict):
        for key in ("add_bos_token", "add_eos_token"):
            if isinstance(tok_config.get(key), bool):
                setattr(vocab, key.replace("_token", ""), tok_config[key])
        template = tok_config.get("chat_template")
        if isinstance(template, str):
            vocab.chat_templates[""] = template
        elif isinstance(template, list):
            for t in template:
                if isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str):
                    vocab.chat_templates["" if t["name"] == "default" else t["name"]] = t["template"]


def token_text(v: Any) -> Optional[str]:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(path, f"is not valid JSON ({e})") from None
