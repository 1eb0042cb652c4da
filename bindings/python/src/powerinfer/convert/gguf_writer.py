"""A streaming GGUF v3 writer (docs/file-format.md): metadata and every tensor's info are known before any
data, so the header is written first and tensor data is then streamed in order, each tensor
padded to the alignment."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO, Sequence

import numpy as np

ALIGNMENT = 32
GGUF_VERSION = 3

# GGUF value types (docs/file-format.md)
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
_NUMPY = {U8: "<u1", I8: "<i1", U16: "<u2", I16: "<i2", U32: "<u4", I32: "<i4", F32: "<f4", BOOL: "<u1", U64: "<u8", I64: "<i8", F64: "<f8"}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    ne: tuple[int, ...]  # ne[0] first: the fastest-varying dimension (numpy's last axis)
    ggml_type: int
    nbytes: int


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pad(n: int) -> int:
    return (-n) % ALIGNMENT


class GGUFWriter:
    def __init__(self) -> None:
        self._kv: list[bytes] = []
        self._keys: set[str] = set()
        self.tensors: list[TensorInfo] = []

    def _add(self, key: str, kind: int, payload: bytes) -> None:
        if key in self._keys:
            raise ValueError(f"duplicate metadata key {key}")
        self._keys.add(key)
        self._kv.append(_string(key) + struct.pack("<I", kind) + payload)

    def add_scalar(self, key: str, kind: int, value: object) -> None:
        self._add(key, kind, struct.pack(_SCALAR[kind], value))

    def add_string(self, key: str, value: str) -> None:
        self._add(key, STRING, _string(value))

    def add_u32(self, key: str, value: int) -> None:
        self.add_scalar(key, U32, value)

    def add_f32(self, key: str, value: float) -> None:
        self.add_scalar(key, F32, value)

    def add_bool(self, key: str, value: bool) -> None:
        self.add_scalar(key, BOOL, value)

    def add_array(self, key: str, kind: int, values: Sequence[object]) -> None:
        head = struct.pack("<IQ", kind, len(values))
        if kind == STRING:
            body = b"".join(_string(str(v)) for v in values)
        else:
            body = np.asarray(values).astype(_NUMPY[kind]).tobytes()
        self._add(key, ARRAY, head + body)

    def add_tensor(self, name: str, ne: Sequence[int], ggml_type: int, nbytes: int) -> None:
        self.tensors.append(TensorInfo(name, tuple(int(d) for d in ne), ggml_type, nbytes))

    def write_header(self, f: BinaryIO) -> list[int]:
        """Writes everything up to the data section; returns each tensor's absolute offset."""
        out = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self._kv)), *self._kv]
        relative, at = [], 0
        for t in self.tensors:
            relative.append(at)
            at += t.nbytes + _pad(t.nbytes)
        for t, off in zip(self.tensors, relative):
            out.append(_string(t.name) + struct.pack("<I", len(t.ne)) + struct.pack(f"<{len(t.ne)}Q", *t.ne) + struct.pack("<IQ", t.ggml_type, off))
        header = b"".join(out)
        f.write(header + b"\0" * _pad(len(header)))
        start = len(header) + _pad(len(header))
        return [start + off for off in relative]


def write_padding(f: BinaryIO, nbytes: int) -> None:
    """The zeros after a tensor of `nbytes` that bring the next one to the alignment."""
    f.write(b"\0" * _pad(nbytes))
