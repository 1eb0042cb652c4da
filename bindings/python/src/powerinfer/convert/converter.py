"""convert(): a Hugging Face model folder (plus a predictor folder for sparse output) to a
PowerInfer sparse GGUF (magic PWRI) or a plain dense GGUF, streamed tensor by tensor into a
temporary file that is renamed over the output only when complete."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Union

from .checkpoint import read_checkpoint
from .errors import ConvertError
from .gguf_writer import GGUFWriter, write_padding
from .hf_config import ModelSpec, read_config
from .metadata import add_metadata
from .output_file import commit, mark_sparse, temporary_beside
from .predictor import Predictor, find_predictor
from .progress import Progress
from .quantize_step import QUANTIZED, quantize
from .tensor_plan import PlannedTensor, plan_tensors
from .tensor_source import TensorRef
from .tokenizer_vocab import read_vocab

OUTTYPES = ("f32", "f16", "q8_0", "q4_0")
StrPath = Union[str, "os.PathLike[str]"]


def default_outfile(model_dir: Path, outtype: str, dense: bool) -> Path:
    """MODEL_DIR/<folder name>.<outtype>.powerinfer.gguf (sparse) or .<outtype>.gguf (dense)."""
    suffix = "gguf" if dense else "powerinfer.gguf"
    return model_dir / f"{model_dir.resolve().name}.{outtype}.{suffix}"


def convert(
    model_dir: StrPath,
    predictor_dir: Optional[StrPath] = None,
    *,
    outfile: Optional[StrPath] = None,
    outtype: str = "f16",
    dense: bool = False,
    threshold: Optional[float] = None,
    keep_predictor: bool = False,
    n_threads: int = 0,
    progress: bool = False,
    log: Optional[Callable[[str], None]] = None,
) -> Path:
    """Converts and returns the output path; raises ConvertError for bad input.

    outtype: f32, f16 (1-D tensors stay F32), or q8_0 / q4_0 (written as F16 or F32 first, then
    quantized by libpowerinfer; the predictor too unless keep_predictor). threshold overrides the
    predictor's sparse_threshold."""
    say = log or (lambda _msg: None)
    model_dir = Path(model_dir)
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {', '.join(OUTTYPES)}, not {outtype!r}")
    if threshold is not None and not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, not {threshold!r}")
    if not model_dir.is_dir():
        raise ConvertError(model_dir, "is not a folder")

    spec = read_config(model_dir)
    if not dense and not spec.relu:
        raise ConvertError(
            model_dir / "config.json",
            f"refusing sparse output for a {spec.family} model with SiLU activations: they are almost never exactly zero, so there is no sparsity to exploit, and PowerInfer's predictor assumes ReLU; use --dense for a plain GGUF",
            "hidden_act",
        )
    tensors = read_checkpoint(model_dir)
    predictor = _predictor(spec, tensors, predictor_dir, model_dir, dense, say)
    vocab = read_vocab(model_dir, spec)
    if spec.fatrelu_threshold:
        say(f"note: ProSparse's FATReLU zeroes gate values <= {spec.fatrelu_threshold}; the engine computes relu(gate)*up (recorded as powerinfer.fatrelu_threshold)")

    written_type = "f32" if outtype == "f32" or (outtype in QUANTIZED and _has_f32_weights(tensors)) else "f16"
    out = Path(outfile) if outfile is not None else default_outfile(model_dir, outtype, dense)
    _check_outfile(out, tensors)
    plan = plan_tensors(spec, tensors, predictor, dense, written_type == "f32")
    writer = GGUFWriter()
    sparse_threshold = threshold if threshold is not None else (predictor.threshold if predictor else None)
    add_metadata(writer, spec, vocab, written_type, not dense, sparse_threshold)
    for t in plan:
        writer.add_tensor(t.name, t.ne, t.ggml_type, t.nbytes)

    kind = "dense" if dense else "sparse"
    say(f"{spec.family} ({spec.arch}, {spec.n_layer} layers, n_embd {spec.n_embd}, n_ff {spec.n_ff}) -> {kind} {outtype.upper()} {out}")
    with temporary_beside(out) as tmp:
        bar = Progress(sum(t.nbytes for t in plan), f"write {written_type}", progress)
        with open(tmp, "wb") as f:
            _write(f, writer, plan, bar)
        bar.close()
        if not dense:
            mark_sparse(tmp)
        if outtype in QUANTIZED:
            with temporary_beside(out) as qtmp:
                qbar = Progress(1000, f"quantize {outtype}", progress)
                quantize(tmp, qtmp, outtype, n_threads, keep_predictor, lambda p: qbar.fraction(p))
                qbar.close()
                tmp.unlink()
                commit(qtmp, out)
        else:
            commit(tmp, out)
    return out


def _predictor(spec: ModelSpec, tensors: dict[str, TensorRef], predictor_dir: Optional[StrPath], model_dir: Path, dense: bool, say: Callable[[str], None]) -> Optional[Predictor]:
    if dense:
        if predictor_dir is not None:
            say(f"note: --dense writes no predictor; {predictor_dir} is not read")
        return None
    predictor = find_predictor(spec, tensors, Path(predictor_dir) if predictor_dir is not None else None, model_dir)
    if predictor is None:
        raise ConvertError(model_dir, "sparse output needs a predictor: give PREDICTOR_DIR (model_{L}.pt files or predictor safetensors), or --dense for a plain GGUF")
    return predictor


def _has_f32_weights(tensors: dict[str, TensorRef]) -> bool:
    return any(len(t.shape) == 2 and t.dtype in ("F32", "F64") for t in tensors.values())


def _check_outfile(out: Path, tensors: dict[str, TensorRef]) -> None:
    if not out.parent.is_dir():
        raise ConvertError(out.parent, "output folder does not exist")
    inputs = {t.file.resolve() for t in tensors.values()}
    if out.resolve() in inputs:
        raise ConvertError(out, "is one of the input files; choose another --outfile")


def _write(f: BinaryIO, writer: GGUFWriter, plan: list[PlannedTensor], bar: Progress) -> None:
    offsets = writer.write_header(f)
    for t, offset in zip(plan, offsets):
        t.write(f, bar.advance)
        written = f.tell() - offset
        if written != t.nbytes:
            raise ConvertError(t.source.file, f"wrote {written} bytes for {t.name}, expected {t.nbytes}", t.source.name)
        write_padding(f, t.nbytes)


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr)
