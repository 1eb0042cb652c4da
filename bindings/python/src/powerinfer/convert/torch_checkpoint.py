"""A restricted reader of torch.save files (the zip format of torch >= 1.6) that rebuilds only
tensors, without torch and without running the pickle's code.

torch.save writes `<archive>/data.pkl`, a pickle whose tensors are calls of
torch._utils._rebuild_tensor_v2 on storages named by persistent ids
('storage', <torch.XStorage class>, key, location, numel); storage `key` is the zip member
`<archive>/data/<key>`. The unpickler resolves only the globals in ALLOWED_GLOBALS, to local
stand-ins; any other global is refused before anything is called. Tensors are then mapped from the
(uncompressed) zip members lazily, like safetensors."""

from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dtypes import ITEMSIZE
from .errors import ConvertError
from .tensor_source import TensorRef

# torch storage class -> source dtype name (only float storages hold weights).
STORAGE_DTYPES = {
    "FloatStorage": "F32",
    "HalfStorage": "F16",
    "BFloat16Storage": "BF16",
    "DoubleStorage": "F64",
}
# Integer storages may appear in a state dict (buffers); they are rebuilt but refused if used.
OTHER_STORAGES = {
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16",
    "CharStorage": "I8", "ByteStorage": "U8", "BoolStorage": "BOOL",
}


@dataclass(frozen=True)
class _StorageType:
    dtype: str


@dataclass(frozen=True)
class _Storage:
    dtype: str
    key: str
    numel: int


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> _Tensor:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("_rebuild_tensor_v2 called on something that is not a storage")
    if not (isinstance(storage_offset, int) and isinstance(size, tuple) and isinstance(stride, tuple)):
        raise pickle.UnpicklingError("_rebuild_tensor_v2 with malformed offset, size or stride")
    return _Tensor(storage, storage_offset, tuple(size), tuple(stride))


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    # nn.Parameter wraps a tensor; the wrapper carries nothing the converter needs.
    return data


def _ordered_dict(*args: Any) -> collections.OrderedDict:
    return collections.OrderedDict(*args)


ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): _ordered_dict,
    **{("torch", name): _StorageType(dtype) for name, dtype in {**STORAGE_DTYPES, **OTHER_STORAGES}.items()},
}


class _RefusedGlobal(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = ALLOWED_GLOBALS.get((module, name))
        if found is None:
            raise _RefusedGlobal(f"{module}.{name}")
        return found

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _StorageType) and isinstance(key, str) and isinstance(numel, int)):
            raise pickle.UnpicklingError(f"malformed storage id {pid!r:.80}")
        return _Storage(storage_type.dtype, key, numel)


def read_torch_checkpoint(path: Path) -> dict[str, TensorRef]:
    """The tensors of a torch.save'd state dict by name; ConvertError for anything else."""
    if not zipfile.is_zipfile(path):
        raise ConvertError(path, "not a zip-format torch.save file (the legacy format of torch < 1.6 is not read; re-save it or use safetensors)")
    with zipfile.ZipFile(path) as zf:
        members = {info.filename: info for info in zf.infolist()}
        pickles = [n for n in members if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ConvertError(path, "has no single <archive>/data.pkl: not a torch.save file")
        prefix = pickles[0][: -len("data.pkl")]
        order = members.get(prefix + "byteorder")
        if order is not None and zf.read(order).strip() not in (b"little", b""):
            raise ConvertError(path, "is a big-endian torch file; only little-endian files are read")
        state = _unpickle(path, zf.read(pickles[0]))
        with open(path, "rb") as raw:
            return {name: _tensor_ref(path, raw, members, prefix, name, t) for name, t in state.items()}


def _unpickle(path: Path, data: bytes) -> dict[str, _Tensor]:
    try:
        state = _RestrictedUnpickler(io.BytesIO(data)).load()
    except _RefusedGlobal as e:
        raise ConvertError(path, f"pickle global {e.name} is not allowed (only tensors are rebuilt; nothing was executed)", "data.pkl") from None
    except Exception as e:  # any malformed pickle: report, never trace back
        raise ConvertError(path, f"cannot read the pickle: {e}", "data.pkl") from None
    if not isinstance(state, dict):
        raise ConvertError(path, f"holds a {type(state).__name__}, not a state dict of tensors", "data.pkl")
    for name, value in state.items():
        if not isinstance(name, str):
            raise ConvertError(path, f"state dict key {name!r:.60} is not a string", "data.pkl")
        if not isinstance(value, _Tensor):
            raise ConvertError(path, f"holds a {type(value).__name__}, not a tensor", name)
    return state


def _tensor_ref(path: Path, raw: Any, members: dict[str, zipfile.ZipInfo], prefix: str, name: str, t: _Tensor) -> TensorRef:
    member = members.get(f"{prefix}data/{t.storage.key}")
    if member is None:
        raise ConvertError(path, f"storage {t.storage.key} is missing from the archive", name)
    if member.compress_type != zipfile.ZIP_STORED:
        raise ConvertError(path, "storage is compressed; torch.save stores storages uncompressed", name)
    itemsize = ITEMSIZE[t.storage.dtype]
    if member.file_size != t.storage.numel * itemsize:
        raise ConvertError(path, f"storage {t.storage.key} has {member.file_size} bytes, expected {t.storage.numel} x {itemsize}", name)
    if any(d < 0 for d in t.shape) or len(t.strides) != len(t.shape) or any(s < 0 for s in t.strides):
        raise ConvertError(path, f"invalid size {t.shape} or stride {t.strides}", name)
    n = math.prod(t.shape)
    last = t.offset + sum((d - 1) * s for d, s in zip(t.shape, t.strides)) if n else t.offset - 1
    if t.offset < 0 or last >= t.storage.numel:
        raise ConvertError(path, f"reaches element {last} of a storage of {t.storage.numel}", name)
    contiguous = _c_strides(t.shape) == t.strides or n <= 1
    return TensorRef(
        name=name,
        file=path,
        dtype=t.storage.dtype,
        shape=t.shape,
        offset=_member_data_offset(path, raw, member) + t.offset * itemsize,
        strides=None if contiguous else t.strides,
        span=None if contiguous else last - t.offset + 1,
    )


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _member_data_offset(path: Path, raw: Any, member: zipfile.ZipInfo) -> int:
    # The local header repeats the name and has its own extra field (torch pads there to align
    # the data), so the data offset must be read from it, not from the central directory.
    raw.seek(member.header_offset)
    local = raw.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise ConvertError(path, "corrupt zip local header", member.filename)
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return member.header_offset + 30 + name_len + extra_len

