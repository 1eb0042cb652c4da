"""TensorRef: one tensor of a checkpoint, described from its file's header and read only when
asked, through a memory map of just its bytes (dropped again when the caller lets go)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .dtypes import ITEMSIZE, SOURCE_DTYPES
from .errors import ConvertError


@dataclass(frozen=True)
class TensorRef:
    name: str
    file: Path
    dtype: str  # a key of SOURCE_DTYPES, or the unsupported type's own name
    shape: tuple[int, ...]
    offset: int  # of the first element in `file`
    # Element strides for a non-contiguous torch tensor; None = C order.
    strides: Optional[tuple[int, ...]] = None
    # Elements the mapped region holds (a torch storage may be larger than its tensor).
    span: Optional[int] = None

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.n_elements * ITEMSIZE[self.dtype]

    def load(self) -> np.ndarray:
        """A read-only array of the stored bits (BF16 as uint16), mapped from the file."""
        if self.dtype not in SOURCE_DTYPES:
            raise ConvertError(self.file, f"dtype {self.dtype} is not a float type the converter reads (F32, F16, BF16, F64)", self.name)
        dtype = SOURCE_DTYPES[self.dtype]
        if self.n_elements == 0:
            return np.zeros(self.shape, dtype)
        if self.strides is None:
            return np.memmap(self.file, dtype=dtype, mode="r", offset=self.offset, shape=self.shape)
        flat = np.memmap(self.file, dtype=dtype, mode="r", offset=self.offset, shape=(self.span,))
        byte_strides = tuple(s * dtype.itemsize for s in self.strides)
        return np.lib.stride_tricks.as_strided(flat, self.shape, byte_strides, writeable=False)
