"""PlannedTensor: one output tensor, its checkpoint source and the transform between them, written
in row blocks from a memory map of just that tensor; Planner: collects them, checking each source's
shape against config.json and that every checkpoint tensor found a place.

Transforms: "copy" (HF [out, in] is GGUF ne=[in, out]: the same bytes), "permute" (the Llama Q/K
rows of each head, see tensor_plan.py), "transpose" (ffn_down_t), "rows" (a row gather in a given
order: Falcon's fused QKV, see falcon_tensors.py).

1-D tensors are always F32; 2-D ones F32 or F16 as asked. No more than a block (a whole matrix for
a transpose) is held at once."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Optional

import numpy as np

from .dtypes import GGML_F16, GGML_F32, GGML_NUMPY, SOURCE_DTYPES, to_numpy_float
from .errors import ConvertError
from .model_spec import ModelSpec
from .predictor import Predictor, is_predictor_tensor
from .tensor_source import TensorRef

BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    source: TensorRef
    transform: str  # "copy", "permute", "transpose" or "rows"
    ggml_type: int
    shape: tuple[int, ...]  # numpy shape of the output (rows, cols); ne is its reverse
    n_head: int = 0  # heads of a permuted Q or K
    row_order: Optional[tuple[int, ...]] = None  # "rows": output row i is source row row_order[i]

    @property
    def ne(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * GGML_NUMPY[self.ggml_type].itemsize

    def write(self, f: BinaryIO, advance: Callable[[int], None]) -> None:
        if self._is_byte_copy():
            _copy_file_range(f, self.source, advance)
            return
        for block in self._blocks():
            f.write(memoryview(block).cast("B"))
            advance(block.nbytes)

    def _is_byte_copy(self) -> bool:
        src = self.source
        return self.transform == "copy" and src.strides is None and src.dtype != "BF16" and SOURCE_DTYPES[src.dtype] == GGML_NUMPY[self.ggml_type]

    def _blocks(self) -> Iterator[np.ndarray]:
        data = self.source.load()
        out = GGML_NUMPY[self.ggml_type]
        if self.transform == "permute":
            head_rows = self.shape[0] // self.n_head
            for h in range(self.n_head):
                w = data[h * head_rows : (h + 1) * head_rows]
                w = w.reshape(2, head_rows // 2, -1).swapaxes(0, 1).reshape(head_rows, -1)
                yield _as(w, self.source, out)
            return
        if self.transform == "transpose":
            data = np.ascontiguousarray(data.T)
        if data.ndim == 1:
            yield _as(data, self.source, out)
            return
        rows = max(1, BLOCK_BYTES // max(1, data.shape[1] * max(out.itemsize, data.dtype.itemsize)))
        order = np.asarray(self.row_order, dtype=np.int64) if self.transform == "rows" else None
        for r in range(0, data.shape[0], rows):
            block = data[order[r : r + rows]] if order is not None else data[r : r + rows]
            yield _as(block, self.source, out)


def _copy_file_range(f: BinaryIO, src: TensorRef, advance: Callable[[int], None]) -> None:
    """Unchanged bytes go file to file inside the kernel, not through Python's memory."""
    f.flush()
    start = f.tell()
    out_fd = f.fileno()
    with open(src.file, "rb") as raw:
        done = 0
        while done < src.nbytes:
            n = min(BLOCK_BYTES * 4, src.nbytes - done)
            try:
                copied = os.copy_file_range(raw.fileno(), out_fd, n, src.offset + done, start + done)
            except OSError:  # a file system or kernel without it: plain reads and writes
                copied = os.pwrite(out_fd, os.pread(raw.fileno(), n, src.offset + done), start + done)
            if copied <= 0:
                raise ConvertError(src.file, "ended early while copying (truncated file?)", src.name)
            done += copied
            advance(copied)
    f.seek(start + done)


def _as(block: np.ndarray, src: TensorRef, out: np.dtype) -> np.ndarray:
    if block.dtype == out and src.dtype != "BF16":
        return np.ascontiguousarray(block)
    values = to_numpy_float(block, src.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        converted = np.ascontiguousarray(values.astype(out, copy=False))
    # A narrowing cast (to F16, or F64 to F32) turns values beyond the range into inf without a
    # word; values that were already inf or NaN in the checkpoint are passed on as they are.
    if out.itemsize < values.dtype.itemsize and not np.isfinite(converted).all():
        if (np.isfinite(values) & ~np.isfinite(converted)).any():
            hint = "values overflow F16; use --outtype f32" if out.itemsize == 2 else "values overflow F32"
            raise ConvertError(src.file, hint, src.name)
    return converted


class Planner:
    """`ignored`: checkpoint tensors that are not weights (buffers such as RoPE frequencies)."""

    def __init__(self, spec: ModelSpec, tensors: dict[str, TensorRef], f32: bool, ignored: re.Pattern[str]):
        self.spec, self.tensors, self.f32, self.ignored = spec, tensors, f32, ignored
        self.used: set[str] = set()
        self.out: list[PlannedTensor] = []

    def _type(self, ndim: int) -> int:
        return GGML_F32 if ndim == 1 or self.f32 else GGML_F16

    def _usable(self, ref: TensorRef) -> None:
        if ref.dtype not in SOURCE_DTYPES:
            raise ConvertError(ref.file, f"dtype {ref.dtype} is not a float type the converter reads (F32, F16, BF16, F64)", ref.name)

    def add(self, name: str, source: str, shape: tuple[int, ...], transform: str = "copy", n_head: int = 0, row_order: Optional[tuple[int, ...]] = None) -> None:
        ref = self.tensors.get(source)
        if ref is None:
            where = next(iter(self.tensors.values())).file.parent if self.tensors else None
            raise ConvertError(where, f"missing from the checkpoint (a {self.spec.family} model with {self.spec.n_layer} layers has it)", source)
        if ref.shape != shape:
            raise ConvertError(ref.file, f"shape {list(ref.shape)}, expected {list(shape)} from config.json", source)
        self._usable(ref)
        self.used.add(source)
        out_shape = shape[::-1] if transform == "transpose" else shape
        self.out.append(PlannedTensor(name, ref, transform, self._type(len(shape)), out_shape, n_head, row_order))

    def add_ref(self, name: str, ref: TensorRef) -> None:
        self._usable(ref)
        self.out.append(PlannedTensor(name, ref, "copy", self._type(len(ref.shape)), ref.shape))

    def add_predictor(self, blk: str, predictor: Optional[Predictor], layer: int) -> None:
        """Layer `layer`'s predictor (fc1, fc2) under the GGUF prefix `blk`: every sparse file has one."""
        assert predictor is not None
        fc1, fc2 = predictor.layers[layer]
        self.add_ref(blk + "fc1.weight", fc1)
        self.add_ref(blk + "fc2.weight", fc2)

    def skip(self, source: str) -> None:
        """A checkpoint tensor the model does not read (a tied output's stored copy)."""
        self.used.add(source)

    def check_all_used(self) -> None:
        for name, ref in self.tensors.items():
            if name in self.used or self.ignored.match(name) or is_predictor_tensor(name):
                continue
            raise ConvertError(ref.file, f"unexpected tensor: not part of a {self.spec.family} model with {self.spec.n_layer} layers (biases, other architectures and extra layers are not converted)", name)
