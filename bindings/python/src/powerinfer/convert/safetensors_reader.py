"""A safetensors file's header: 8-byte little-endian length, a JSON object naming each tensor's
dtype, shape and [begin, end) byte range in the data that follows. Every field and range is
checked against the file before any tensor is read."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .dtypes import ITEMSIZE
from .errors import ConvertError
from .tensor_source import TensorRef

# Real headers are a few MB at most; a larger length is a corrupt file, not a big model.
MAX_HEADER_BYTES = 100 << 20


def read_safetensors(path: Path) -> dict[str, TensorRef]:
    """The tensors of `path` by name, in file order; ConvertError on any inconsistency."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ConvertError(path, f"truncated: {size} bytes, shorter than the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise ConvertError(path, f"truncated header: it claims {n} bytes but the file has {size - 8} after the length")
        if n > MAX_HEADER_BYTES:
            raise ConvertError(path, f"header length {n} is implausibly large (corrupt file?)")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(path, f"header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ConvertError(path, "header is not a JSON object")

    data_start = 8 + n
    data_size = size - data_start
    tensors: dict[str, TensorRef] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(path, name, info, data_start, data_size)
    _check_no_overlap(path, tensors, data_start)
    return tensors


def _tensor(path: Path, name: str, info: object, data_start: int, data_size: int) -> TensorRef:
    if not isinstance(info, dict):
        raise ConvertError(path, "header entry is not an object", name)
    dtype = info.get("dtype")
    shape = info.get("shape")
    offsets = info.get("data_offsets")
    if not isinstance(dtype, str):
        raise ConvertError(path, "header entry has no dtype", name)
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ConvertError(path, f"shape {shape!r} is not a list of non-negative integers", name)
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
    ):
        raise ConvertError(path, f"data_offsets {offsets!r} is not a pair of integers", name)
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise ConvertError(path, f"data_offsets [{begin}, {end}] lie outside the {data_size} data bytes (truncated file?)", name)
    if dtype not in ITEMSIZE:
        raise ConvertError(path, f"dtype {dtype!r} is not a safetensors type", name)
    expected = math.prod(shape) * ITEMSIZE[dtype]
    if end - begin != expected:
        raise ConvertError(path, f"holds {end - begin} bytes but {dtype} {shape} needs {expected}", name)
    return TensorRef(name=name, file=path, dtype=dtype, shape=tuple(shape), offset=data_start + begin)


def _check_no_overlap(path: Path, tensors: dict[str, TensorRef], data_start: int) -> None:
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors.values() if t.nbytes)
    for (_, end_a, name_a), (begin_b, _, name_b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise ConvertError(path, f"data overlaps that of {name_a}", name_b)
