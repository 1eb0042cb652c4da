"""Source element types (safetensors / torch names) and the two GGUF types the converter writes
itself; quantized types come from the C library."""

from __future__ import annotations

import numpy as np

# Source element type name -> numpy dtype of its stored bits. BF16 has no numpy type: its bits
# are read as uint16 and widened by bf16_to_f32.
SOURCE_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}

# Bytes per element of every safetensors type, so that a header is checked whole even where it
# holds a tensor the converter does not use (such as an integer buffer).
ITEMSIZE = {
    **{name: dt.itemsize for name, dt in SOURCE_DTYPES.items()},
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
}

GGML_F32 = 0
GGML_F16 = 1
GGML_NUMPY = {GGML_F32: np.dtype("<f4"), GGML_F16: np.dtype("<f2")}
GGML_NAMES = {GGML_F32: "F32", GGML_F16: "F16"}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """BF16 is the upper half of an IEEE binary32: shifting its bits up 16 is exact."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def to_numpy_float(data: np.ndarray, source_dtype: str) -> np.ndarray:
    """The values of `data` (stored as `source_dtype`) as a float array numpy can compute with."""
    return bf16_to_f32(data) if source_dtype == "BF16" else data
