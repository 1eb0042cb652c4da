"""A restricted reader of torch.save files (the zip format of torch >= 1.6) that rebuilds only
tensors, without torch and without running the pickle's code.

torch.save writes `<archive>/data.pkl`, a pickle whose tensors are calls of
torch._utils._rebuild_tensor_v2 on storages named by persistent ids
('storage', <torch.XStorage class>, key, location, numel); storage `key` is the zip member
`<archive>/data/<key>`. The unpickler resolves only the globals in FUNCTIONS and the torch
storage classes, each to a fresh sealed stand-in (a BUILD opcode cannot alter it); any other
global is refused before anything is called. Tensors are then mapped from the
(uncompressed) zip members lazily, like safetensors."""

from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any, Callable

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


class _Sealed:
    """Base of every object the unpickler hands out: fresh per use, no __dict__, and refusing
    the pickle's BUILD opcode, so that a pickle cannot rewrite what the converter later trusts."""

    __slots__ = ()

    def __init__(self, **fields: Any):
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise pickle.UnpicklingError(f"the pickle tries to set {key!r} on a {type(self).__name__.lstrip('_')} (BUILD); refused")

    def __setstate__(self, state: Any) -> None:
        raise pickle.UnpicklingError(f"the pickle tries to change a {type(self).__name__.lstrip('_')} (BUILD); refused")


class _StorageType(_Sealed):
    __slots__ = ("name",)
    name: str


class _Storage(_Sealed):
    __slots__ = ("dtype", "key", "numel")
    dtype: str
    key: str
    numel: int


class _Tensor(_Sealed):
    """The raw arguments of _rebuild_tensor_v2, validated only once the whole pickle is read."""

    __slots__ = ("storage", "offset", "shape", "strides")
    storage: Any
    offset: Any
    shape: Any
    strides: Any


class _Global(_Sealed):
    __slots__ = ("call",)
    call: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return self.call(*args)


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> _Tensor:
    return _Tensor(storage=storage, offset=storage_offset, shape=size, strides=stride)


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    # nn.Parameter wraps a tensor; the wrapper carries nothing the converter needs.
    return data


def _ordered_dict(*args: Any) -> collections.OrderedDict:
    return collections.OrderedDict(*args)


FUNCTIONS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): _ordered_dict,
}
STORAGES = {**STORAGE_DTYPES, **OTHER_STORAGES}
MAX_PICKLE_BYTES = 512 << 20


class _RefusedGlobal(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in FUNCTIONS:
            return _Global(call=FUNCTIONS[module, name])
        if module == "torch" and name in STORAGES:
            return _StorageType(name=name)
        raise _RefusedGlobal(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _StorageType) and type(key) is str and type(numel) is int and numel >= 0):
            raise pickle.UnpicklingError(f"malformed storage id {pid!r:.80}")
        return _Storage(dtype=STORAGES[storage_type.name], key=key, numel=numel)


def read_torch_checkpoint(path: Path) -> dict[str, TensorRef]:
    """The tensors of a torch.save'd state dict by name; ConvertError for anything else."""
    if not zipfile.is_zipfile(path):
        raise ConvertError(path, "not a zip-format torch.save file (the legacy format of torch < 1.6 is not read; re-save it or use safetensors)")
    try:
        with zipfile.ZipFile(path) as zf:
            members = {info.filename: info for info in zf.infolist()}
            pickles = [n for n in members if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise ConvertError(path, "has no single <archive>/data.pkl: not a torch.save file")
            prefix = pickles[0][: -len("data.pkl")]
            order = members.get(prefix + "byteorder")
            if order is not None and _read_small(path, zf, order, 16).strip() not in (b"little", b""):
                raise ConvertError(path, "is a big-endian torch file; only little-endian files are read")
            state = _unpickle(path, _read_small(path, zf, members[pickles[0]], MAX_PICKLE_BYTES))
            size = path.stat().st_size
            with open(path, "rb") as raw:
                return {name: _tensor_ref(path, raw, size, members, prefix, name, t) for name, t in state.items()}
    except zipfile.BadZipFile as e:
        raise ConvertError(path, f"corrupt zip archive ({e})") from None


def _read_small(path: Path, zf: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    # torch.save stores every member; refusing the others keeps a crafted archive from
    # inflating a small file into gigabytes (a zip bomb).
    if member.compress_type != zipfile.ZIP_STORED:
        raise ConvertError(path, "is compressed; torch.save stores its members uncompressed", member.filename)
    if max(member.file_size, member.compress_size) > limit:
        raise ConvertError(path, f"has {member.file_size} bytes, more than the {limit} allowed", member.filename)
    return zf.read(member)


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


def _tensor_ref(path: Path, raw: Any, file_size: int, members: dict[str, zipfile.ZipInfo], prefix: str, name: str, t: _Tensor) -> TensorRef:
    storage = t.storage
    if not isinstance(storage, _Storage):
        raise ConvertError(path, "_rebuild_tensor_v2 called on something that is not a storage", name)
    if not (isinstance(t.shape, tuple) and isinstance(t.strides, tuple)) or not all(type(v) is int for v in (t.offset, *t.shape, *t.strides)):
        raise ConvertError(path, f"storage offset, size and stride must be integers (got {t.offset!r:.20}, {t.shape!r:.60}, {t.strides!r:.60})", name)
    shape, strides, offset = t.shape, t.strides, t.offset
    member = members.get(f"{prefix}data/{storage.key}")
    if member is None:
        raise ConvertError(path, f"storage {storage.key} is missing from the archive", name)
    if member.compress_type != zipfile.ZIP_STORED:
        raise ConvertError(path, "storage is compressed; torch.save stores storages uncompressed", name)
    itemsize = ITEMSIZE[storage.dtype]
    if member.file_size != storage.numel * itemsize:
        raise ConvertError(path, f"storage {storage.key} has {member.file_size} bytes, expected {storage.numel} x {itemsize}", name)
    if any(d < 0 for d in shape) or len(strides) != len(shape) or any(s < 0 for s in strides):
        raise ConvertError(path, f"invalid size {shape} or stride {strides}", name)
    n = math.prod(shape)
    last = offset + sum((d - 1) * s for d, s in zip(shape, strides)) if n else offset - 1
    if offset < 0 or last >= storage.numel:
        raise ConvertError(path, f"reaches element {last} of a storage of {storage.numel}", name)
    data_offset = _member_data_offset(path, raw, member)
    if data_offset + member.file_size > file_size:
        raise ConvertError(path, f"storage {storage.key} runs past the end of the file (truncated file?)", name)
    contiguous = _c_strides(shape) == strides or n <= 1
    return TensorRef(
        name=name,
        file=path,
        dtype=storage.dtype,
        shape=shape,
        offset=data_offset + offset * itemsize,
        strides=None if contiguous else strides,
        span=None if contiguous else last - offset + 1,
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

