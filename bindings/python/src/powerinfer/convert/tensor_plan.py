"""Which GGUF tensor comes from which checkpoint tensor, and how (docs/file-format.md):

* token_embd, output_norm, output, blk.N.{attn_norm, attn_v, attn_output, ffn_norm, ffn_gate,
  ffn_up} are copied (HF [out, in] is GGUF ne=[in, out]: the same bytes);
* blk.N.attn_q / attn_k have their rows permuted as llama.cpp's convert.py `permute` does (with
  n_head for Q and n_head_kv for K), turning HF's rotate-half RoPE layout into the interleaved
  pairs RoPE mode 0 rotates:
      w.reshape(n_head, 2, head_dim // 2, n_embd).swapaxes(1, 2).reshape(w.shape)
* sparse files store blk.N.ffn_down_t = down_proj.weight.T (one row per FFN neuron) and the
  predictor's blk.N.fc1 / fc2 as they are; dense files store blk.N.ffn_down as it is.

1-D tensors are always F32; 2-D ones F32 or F16 as asked. Data is streamed in row blocks from
each tensor's memory map, so no more than a block (a whole matrix for a transpose) is held."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Optional

import numpy as np

from .dtypes import GGML_F16, GGML_F32, GGML_NUMPY, SOURCE_DTYPES, to_numpy_float
from .errors import ConvertError
from .hf_config import ModelSpec
from .predictor import Predictor, is_predictor_tensor
from .tensor_source import TensorRef

BLOCK_BYTES = 16 << 20
IGNORED = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    source: TensorRef
    transform: str  # "copy", "permute" or "transpose"
    ggml_type: int
    shape: tuple[int, ...]  # numpy shape of the output (rows, cols); ne is its reverse
    n_head: int = 0  # heads of a permuted Q or K

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
        for r in range(0, data.shape[0], rows):
            yield _as(data[r : r + rows], self.source, out)


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


def plan_tensors(spec: ModelSpec, tensors: dict[str, TensorRef], predictor: Optional[Predictor], dense: bool, f32: bool) -> list[PlannedTensor]:
    plan = _Planner(spec, tensors, f32)
    plan.add("token_embd.weight", "model.embed_tokens.weight", (spec.n_vocab, spec.n_embd))
    plan.add("output_norm.weight", "model.norm.weight", (spec.n_embd,))
    if "lm_head.weight" in tensors or not spec.tie_embeddings:
        plan.add("output.weight", "lm_head.weight", (spec.n_vocab, spec.n_embd))
    else:
        plan.add("output.weight", "model.embed_tokens.weight", (spec.n_vocab, spec.n_embd))
    kv = spec.n_head_kv * spec.head_dim
    for il in range(spec.n_layer):
        hf, blk = f"model.layers.{il}.", f"blk.{il}."
        plan.add(blk + "attn_norm.weight", hf + "input_layernorm.weight", (spec.n_embd,))
        plan.add(blk + "attn_q.weight", hf + "self_attn.q_proj.weight", (spec.n_embd, spec.n_embd), "permute", spec.n_head)
        plan.add(blk + "attn_k.weight", hf + "self_attn.k_proj.weight", (kv, spec.n_embd), "permute", spec.n_head_kv)
        plan.add(blk + "attn_v.weight", hf + "self_attn.v_proj.weight", (kv, spec.n_embd))
        plan.add(blk + "attn_output.weight", hf + "self_attn.o_proj.weight", (spec.n_embd, spec.n_embd))
        plan.add(blk + "ffn_norm.weight", hf + "post_attention_layernorm.weight", (spec.n_embd,))
        plan.add(blk + "ffn_gate.weight", hf + "mlp.gate_proj.weight", (spec.n_ff, spec.n_embd))
        plan.add(blk + "ffn_up.weight", hf + "mlp.up_proj.weight", (spec.n_ff, spec.n_embd))
        if dense:
            plan.add(blk + "ffn_down.weight", hf + "mlp.down_proj.weight", (spec.n_embd, spec.n_ff))
        else:
            plan.add(blk + "ffn_down_t.weight", hf + "mlp.down_proj.weight", (spec.n_embd, spec.n_ff), "transpose")
            assert predictor is not None
            fc1, fc2 = predictor.layers[il]
            plan.add_ref(blk + "fc1.weight", fc1)
            plan.add_ref(blk + "fc2.weight", fc2)
    plan.check_all_used()
    return plan.out


class _Planner:
    def __init__(self, spec: ModelSpec, tensors: dict[str, TensorRef], f32: bool):
        self.spec, self.tensors, self.f32 = spec, tensors, f32
        self.used: set[str] = set()
        self.out: list[PlannedTensor] = []

    def _type(self, ndim: int) -> int:
        return GGML_F32 if ndim == 1 or self.f32 else GGML_F16

    def _usable(self, ref: TensorRef) -> None:
        if ref.dtype not in SOURCE_DTYPES:
            raise ConvertError(ref.file, f"dtype {ref.dtype} is not a float type the converter reads (F32, F16, BF16, F64)", ref.name)

    def add(self, name: str, source: str, shape: tuple[int, ...], transform: str = "copy", n_head: int = 0) -> None:
        ref = self.tensors.get(source)
        if ref is None:
            where = next(iter(self.tensors.values())).file.parent if self.tensors else None
            raise ConvertError(where, f"missing from the checkpoint (a {self.spec.family} model with {self.spec.n_layer} layers has it)", source)
        if ref.shape != shape:
            raise ConvertError(ref.file, f"shape {list(ref.shape)}, expected {list(shape)} from config.json", source)
        self._usable(ref)
        self.used.add(source)
        out_shape = shape[::-1] if transform == "transpose" else shape
        self.out.append(PlannedTensor(name, ref, transform, self._type(len(shape)), out_shape, n_head))

    def add_ref(self, name: str, ref: TensorRef) -> None:
        self._usable(ref)
        self.out.append(PlannedTensor(name, ref, "copy", self._type(len(ref.shape)), ref.shape))

    def check_all_used(self) -> None:
        for name, ref in self.tensors.items():
            if name in self.used or IGNORED.match(name) or is_predictor_tensor(name):
                continue
            raise ConvertError(ref.file, f"unexpected tensor: not part of a {self.spec.family} model with {self.spec.n_layer} layers (biases, other architectures and extra layers are not converted)", name)
