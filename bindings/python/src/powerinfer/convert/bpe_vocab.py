"""A byte-level (GPT-2 style) BPE vocabulary, Falcon's and OPT's, as GGUF `gpt2` tokenizer
metadata (docs/converter.md), from tokenizer.json or from GPT2Tokenizer's vocab.json +
merges.txt:

* tokens: the pieces in id order, as the vocabulary spells them (bytes mapped to GPT-2's
  printable characters, " " as "Ġ"), then added tokens; type 1 (normal), or 3 (control) for a
  special added token or a token the tokenizer files name as BOS/EOS/UNK/PAD, 4
  (user-defined) for another added token; `[PAD<id>]` tokens of type 5 (unused) fill a
  vocab_size larger than the vocabulary (padded embeddings);
* merges: "left right", in rank order, each checked against the vocabulary;
* pre: the pre-tokenizer's split, "gpt-2" (ByteLevel's GPT-2 regex) or "falcon"
  (Punctuation, ByteLevel, Digits), as llama.cpp names them; any other is refused, since the
  engine would split the text differently from the model's own tokenizer;
* add_bos / add_eos: from tokenizer_config.json, else whether tokenizer.json's post-processor
  puts a special token first / last (OPT's puts "</s>" first, Falcon's adds nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .errors import ConvertError
from .model_spec import ModelSpec
from .vocab_common import CONTROL, NORMAL, SPECIAL_KEYS, UNUSED, USER_DEFINED, Vocab, json_file, pieces_by_id, read_specials


def read_byte_level_vocab(folder: Path, spec: ModelSpec) -> Vocab:
    if (folder / "tokenizer.json").is_file():
        vocab = _from_tokenizer_json(folder / "tokenizer.json")
    elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        vocab = _from_vocab_and_merges(folder)
    else:
        raise ConvertError(folder, f"has no tokenizer.json, nor vocab.json with merges.txt: a {spec.family} model needs its byte-level BPE tokenizer")
    if len(vocab.tokens) > spec.n_vocab:
        raise ConvertError(vocab.source, f"has {len(vocab.tokens)} tokens but config.json's vocab_size is {spec.n_vocab}")
    for i in range(len(vocab.tokens), spec.n_vocab):
        vocab.tokens.append(f"[PAD{i}]")
        vocab.types.append(UNUSED)
    read_specials(folder, spec, vocab)
    _mark_named_specials(vocab)
    return vocab


def _from_tokenizer_json(path: Path) -> Vocab:
    data = json_file(path)
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise ConvertError(path, "has no model section")
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        kind = "a BPE with byte_fallback (SentencePiece-style)" if model.get("type") == "BPE" else f"a {model.get('type')!r} model"
        raise ConvertError(path, f"is {kind}, not the byte-level BPE that Falcon and OPT use", "model.type")
    if data.get("normalizer") is not None:
        raise ConvertError(path, f"has a {_kind(data['normalizer'])} normalizer, which the engine's byte-level BPE does not apply", "normalizer")
    pieces = pieces_by_id(path, model.get("vocab"))
    vocab = Vocab(pieces, [], [NORMAL] * len(pieces), source=path, model="gpt2", pre=_pre_name(path, data.get("pre_tokenizer")))
    vocab.merges = _merges(path, model.get("merges"), set(pieces), "model.merges")
    _add_tokens(path, vocab, data.get("added_tokens") or [], "added_tokens")
    vocab.add_bos, vocab.add_eos = _template_ends(data.get("post_processor"))
    return vocab


def _from_vocab_and_merges(folder: Path) -> Vocab:
    path = folder / "vocab.json"
    pieces = pieces_by_id(path, json_file(path))
    vocab = Vocab(pieces, [], [NORMAL] * len(pieces), source=path, model="gpt2", pre="gpt-2", add_bos=False, add_eos=False)
    merges_path = folder / "merges.txt"
    try:
        lines = merges_path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise ConvertError(merges_path, f"is not UTF-8 text ({e})") from None
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    vocab.merges = _merges(merges_path, [line.rstrip("\r") for line in lines if line.strip()], set(pieces), "merges")
    tok_config = json_file(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    if isinstance(tok_config, dict):
        if tok_config.get("add_prefix_space"):
            raise ConvertError(folder / "tokenizer_config.json", "add_prefix_space is true: the engine's byte-level BPE does not put a space before the text", "add_prefix_space")
        decoder = tok_config.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            added = [{**t, "id": int(i)} for i, t in decoder.items() if isinstance(t, dict) and str(i).isdigit()]
            _add_tokens(folder / "tokenizer_config.json", vocab, sorted(added, key=lambda t: t["id"]), "added_tokens_decoder")
    if (folder / "added_tokens.json").is_file():
        data = json_file(folder / "added_tokens.json")
        if isinstance(data, dict):
            added = sorted(({"id": i, "content": text} for text, i in data.items() if isinstance(i, int)), key=lambda t: t["id"])
            _add_tokens(folder / "added_tokens.json", vocab, added, "")
    return vocab


def _kind(node: Any) -> str:
    return repr(node.get("type")) if isinstance(node, dict) else repr(node)


def _pre_name(path: Path, pre: Any) -> str:
    parts = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    if not isinstance(parts, list):
        parts = [parts]
    kinds = [p.get("type") if isinstance(p, dict) else None for p in parts]
    for p in parts:
        if isinstance(p, dict) and p.get("type") == "ByteLevel":
            if p.get("add_prefix_space"):
                raise ConvertError(path, "ByteLevel add_prefix_space is true: the engine's byte-level BPE does not put a space before the text", "pre_tokenizer")
            if p.get("use_regex", True) is False and kinds == ["ByteLevel"]:
                raise ConvertError(path, "ByteLevel without its regex does not split words, which the engine's byte-level BPE always does", "pre_tokenizer")
    if kinds == ["ByteLevel"]:
        return "gpt-2"
    if "ByteLevel" in kinds and "Punctuation" in kinds and "Digits" in kinds:
        return "falcon"
    shown = ", ".join(str(k) for k in kinds) if pre is not None else "none"
    raise ConvertError(path, f"pre-tokenizer ({shown}) is neither GPT-2's (ByteLevel) nor Falcon's (Punctuation, ByteLevel, Digits), the two splits the engine's byte-level BPE makes", "pre_tokenizer")


def _merges(path: Path, merges: Any, pieces: set[str], key: str) -> list[str]:
    if not isinstance(merges, list):
        raise ConvertError(path, "BPE merges is not a list", key)
    out = []
    for r, merge in enumerate(merges):
        if isinstance(merge, str):
            pair = merge.split(" ")
        elif isinstance(merge, list) and all(isinstance(p, str) and " " not in p for p in merge):
            pair = merge
        else:
            pair = []
        if len(pair) != 2 or not all(pair):
            raise ConvertError(path, f"merge {r} is {merge!r:.60}, not 'left right' or [left, right]", key)
        for piece in (pair[0], pair[1], pair[0] + pair[1]):
            if piece not in pieces:
                raise ConvertError(path, f"merge {r} ({pair[0]!r} {pair[1]!r}) needs {piece!r}, which is not in the vocabulary", key)
        out.append(f"{pair[0]} {pair[1]}")
    return out


def _add_tokens(path: Path, vocab: Vocab, added: list[Any], key: str) -> None:
    """Added tokens: a new id appends (ids must follow on), an id inside the vocabulary must hold
    the same text; either way the token becomes control (special) or user-defined."""
    for t in added:
        if not (isinstance(t, dict) and isinstance(t.get("id"), int) and isinstance(t.get("content"), str)):
            raise ConvertError(path, f"added token {t!r:.60} has no integer id and string content", key or None)
        i, text = t["id"], t["content"]
        if i == len(vocab.tokens):
            vocab.tokens.append(text)
            vocab.types.append(NORMAL)
        elif i > len(vocab.tokens):
            raise ConvertError(path, f"added token {text!r} has id {i}, but the next free id is {len(vocab.tokens)}", key or None)
        elif vocab.tokens[i] != text:
            raise ConvertError(path, f"added token {text!r} has id {i}, which the vocabulary gives to {vocab.tokens[i]!r}", key or None)
        vocab.types[i] = CONTROL if t.get("special") else USER_DEFINED


def _template_ends(post: Any) -> tuple[Optional[bool], Optional[bool]]:
    """(add_bos, add_eos) from a TemplateProcessing post-processor; none adds nothing."""
    if post is None:
        return False, False
    steps = post.get("processors") if isinstance(post, dict) and post.get("type") == "Sequence" else [post]
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and step.get("type") == "TemplateProcessing":
            single = step.get("single")
            if not isinstance(single, list) or not single:
                return None, None
            return _is_special(single[0]), _is_special(single[-1])
    return False, False


def _is_special(item: Any) -> bool:
    return isinstance(item, dict) and "SpecialToken" in item


def _mark_named_specials(vocab: Vocab) -> None:
    """Tokens named BOS/EOS/UNK/PAD are control tokens even where the vocabulary lists them as
    ordinary pieces (GPT2Tokenizer's vocab.json does)."""
    for key in SPECIAL_KEYS:
        i = vocab.special_ids.get(key)
        if i is not None and vocab.types[i] in (NORMAL, USER_DEFINED):
            vocab.types[i] = CONTROL
