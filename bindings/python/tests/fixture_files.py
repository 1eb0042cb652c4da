"""Readers of the really-trained fixture's source files, written apart from the converter so
that the conversion is checked against an independent reading of the checkpoint.

- safetensors: an 8-byte little-endian header length, a JSON header, then the raw data;
- PowerInfer's predictor files: torch.save zip archives whose data.pkl rebuilds each tensor from
  a storage kept in data/<key> (read with the standard library's unpickler, no torch).
"""

from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np

_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    (header_len,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _SAFETENSORS_DTYPES[info["dtype"]]
        tensors[name] = np.frombuffer(data[base + begin : base + end], dtype=dtype).reshape(
            info["shape"]
        )
    return tensors


_STORAGE_DTYPES = {"FloatStorage": np.float32, "HalfStorage": np.float16}


class _StateDictUnpickler(pickle.Unpickler):
    def __init__(self, archive: zipfile.ZipFile, prefix: str, file) -> None:
        super().__init__(file)
        self._archive = archive
        self._prefix = prefix

    def find_class(self, module: str, name: str):
        if module == "collections" and name == "OrderedDict":
            import collections

            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")

    def persistent_load(self, pid):
        _, dtype, key, _location, numel = pid
        raw = self._archive.read(f"{self._prefix}/data/{key}")
        return np.frombuffer(raw, dtype=dtype, count=numel)


def _rebuild_tensor(storage, offset, shape, stride, *_):
    if not shape:
        return storage[offset].copy()
    itemsize = storage.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=shape, strides=[s * itemsize for s in stride]
    ).copy()


def read_torch_state_dict(path: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(path) as archive:
        pkl = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        prefix = pkl[: -len("/data.pkl")]
        with archive.open(pkl) as file:
            return dict(_StateDictUnpickler(archive, prefix, file).load())


def permute_for_rope(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's row order for Q and K: each head's two rotary halves interleaved pairwise,
    so that the engine's adjacent-pair RoPE equals transformers' rotate-half RoPE."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )
