"""--outtype q8_0 / q4_0: the F16 (or F32) file just written is quantized by libpowerinfer's
pi_model_quantize, which keeps the magic (PWRI stays PWRI), the metadata and the tensor order and
leaves 1-D tensors F32."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from .. import _powerinfer
from .._errors import Error
from .errors import ConvertError

QUANTIZED = {"q8_0": "Q8_0", "q4_0": "Q4_0"}


def quantize(src: Path, dst: Path, outtype: str, n_threads: int, keep_predictor: bool, progress: Optional[Callable[[float], None]]) -> None:
    try:
        _powerinfer.model_quantize(os.fsencode(src), os.fsencode(dst), QUANTIZED[outtype], n_threads, keep_predictor, progress)
    except Error as e:
        raise ConvertError(dst, f"quantizing to {QUANTIZED[outtype]} failed: {e}") from None
