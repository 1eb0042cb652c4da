"""torch.save checkpoints (pytorch_model*.bin, PowerInfer's predictor model_{L}.pt) through
libpowerinfer's reader in lib/formats, the one the planner uses too (docs/converter.md): it
rebuilds only tensors, runs none of the pickle's code, and checks every size, stride and offset
against the file. Only each tensor's description comes back; its bytes are mapped from the file
when the converter asks, like safetensors."""

from __future__ import annotations

import os
from pathlib import Path

from .. import _powerinfer
from .errors import ConvertError
from .tensor_source import TensorRef

# data.pkl above this is refused: a real state dict's pickle is a few hundred KB. The value is
# the library's own (formats::default_max_pickle_bytes); a module name so tests can lower it.
MAX_PICKLE_BYTES: int = _powerinfer.TORCH_MAX_PICKLE_BYTES


def read_torch_checkpoint(path: Path) -> dict[str, TensorRef]:
    """The tensors of a torch.save'd state dict by name; ConvertError for anything else."""
    try:
        described = _powerinfer.read_torch_checkpoint(os.fsencode(path), MAX_PICKLE_BYTES)
    except ValueError as e:
        raise ConvertError(path, str(e)) from None
    tensors: dict[str, TensorRef] = {}
    for name, dtype, shape, strides, offset, span, contiguous in described:
        tensors[name] = TensorRef(
            name=name,
            file=path,
            dtype=dtype,
            shape=shape,
            offset=offset,
            strides=None if contiguous else strides,
            span=None if contiguous else span,
        )
    return tensors
