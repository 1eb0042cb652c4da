"""The pieces of a SentencePiece tokenizer.model, read from its protobuf wire format directly
(no sentencepiece or protobuf package needed).

ModelProto field 1 is the repeated SentencePiece {1: piece (string), 2: score (float),
3: type (enum)}; field 2 is TrainerSpec, whose fields 40-43 are unk/bos/eos/pad ids. The piece
type enum (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, BYTE 6, UNUSED 5) uses the same numbers
as GGUF's tokenizer.ggml.token_type."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from .errors import ConvertError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


@dataclass
class SentencePieceModel:
    pieces: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    special_ids: dict[str, Optional[int]] = field(default_factory=dict)  # unk, bos, eos, pad


class _WireError(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise _WireError("varint longer than 64 bits")


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value): int for varints and fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire == FIXED64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == FIXED32:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == LENGTH:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        else:
            raise _WireError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise _WireError("field runs past the end")
        yield number, wire, value


PIECE_TYPES = range(1, 7)


def read_sentencepiece_model(path: Path) -> SentencePieceModel:
    try:
        m = _parse(path.read_bytes())
    except (_WireError, UnicodeDecodeError, struct.error) as e:
        raise ConvertError(path, f"is not a SentencePiece model ({e})") from None
    for i, kind in enumerate(m.types):
        if kind not in PIECE_TYPES:
            raise ConvertError(path, f"piece type {kind} is not one of 1..6", f"piece {i}")
    return m


def _parse(buf: bytes) -> SentencePieceModel:
    m = SentencePieceModel()
    trainer: dict[int, int] = {}
    for number, wire, value in _fields(buf):
        if number == 1 and wire == LENGTH:
            piece, score, kind = "", 0.0, 1
            for n2, w2, v2 in _fields(value):  # type: ignore[arg-type]
                if n2 == 1 and w2 == LENGTH:
                    piece = bytes(v2).decode("utf-8", errors="strict")  # type: ignore[arg-type]
                elif n2 == 2 and w2 == FIXED32:
                    score = struct.unpack("<f", v2)[0]  # type: ignore[arg-type]
                elif n2 == 3 and w2 == VARINT:
                    kind = int(v2)  # type: ignore[arg-type]
            m.pieces.append(piece)
            m.scores.append(score)
            m.types.append(kind)
        elif number == 2 and wire == LENGTH:
            for n2, w2, v2 in _fields(value):  # type: ignore[arg-type]
                if w2 == VARINT and 40 <= n2 <= 43:
                    trainer[n2] = int(v2)  # type: ignore[arg-type]
    if not m.pieces:
        raise _WireError("no pieces")
    # TrainerSpec defaults: unk 0, bos 1, eos 2, pad -1; int32 -1 arrives as a 64-bit varint.
    for key, number, default in (("unk", 40, 0), ("bos", 41, 1), ("eos", 42, 2), ("pad", 43, -1)):
        v = trainer.get(number, default)
        v = v - (1 << 64) if v >= 1 << 63 else v
        m.special_ids[key] = v if 0 <= v < len(m.pieces) else None
    return m
