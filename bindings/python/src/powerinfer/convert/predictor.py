"""The activation predictor of each layer (docs/file-format.md): fc1 [r, n_embd] and fc2 [n_ff, r], from

* PowerInfer's *-Predictor folder: model_{L}.pt per layer, each a torch-saved state dict with
  fc1.weight and fc2.weight, plus an optional config.json whose sparse_threshold becomes
  powerinfer.sparse_threshold;
* safetensors holding model.layers.{L}.mlp.predictor.fc{1,2}.weight, in the predictor folder
  or in the model's own checkpoint.

Layer count, ranks and shapes are checked against the model; errors name the file and tensor."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .checkpoint import read_checkpoint
from .errors import ConvertError
from .model_spec import ModelSpec
from .safetensors_reader import read_safetensors
from .tensor_source import TensorRef
from .torch_checkpoint import read_torch_checkpoint

LAYER_FILE = re.compile(r"^model_(\d+)\.pt$")
HF_NAME = re.compile(r"^model\.layers\.(\d+)\.mlp\.predictor\.(fc[12])\.weight$")


@dataclass(frozen=True)
class Predictor:
    layers: list[tuple[TensorRef, TensorRef]]  # (fc1, fc2) per layer
    threshold: Optional[float]
    source: Path


def is_predictor_tensor(name: str) -> bool:
    return HF_NAME.match(name) is not None


def find_predictor(spec: ModelSpec, model_tensors: dict[str, TensorRef], folder: Optional[Path], model_dir: Path) -> Optional[Predictor]:
    """The predictor from `folder`, else from the model's checkpoint, else None."""
    if folder is not None:
        if not folder.is_dir():
            raise ConvertError(folder, "predictor folder does not exist")
        per_layer = {int(m.group(1)): folder / p.name for p in folder.iterdir() if (m := LAYER_FILE.match(p.name))}
        if per_layer:
            layers = _torch_layers(spec, folder, per_layer)
        else:
            tensors = _predictor_safetensors(folder)
            layers = _hf_layers(spec, folder, tensors)
        return Predictor(layers, _threshold(folder), folder)
    embedded = {n: t for n, t in model_tensors.items() if is_predictor_tensor(n)}
    if not embedded:
        return None
    return Predictor(_hf_layers(spec, model_dir, embedded), None, model_dir)


def _predictor_safetensors(folder: Path) -> dict[str, TensorRef]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConvertError(folder, "has no model_{L}.pt files and no safetensors with model.layers.{L}.mlp.predictor.fc1/fc2.weight")
    if (folder / "model.safetensors.index.json").is_file() or (folder / "model.safetensors").is_file():
        tensors = read_checkpoint(folder)
    else:
        tensors = {}
        for f in files:
            tensors.update(read_safetensors(f))
    return {n: t for n, t in tensors.items() if is_predictor_tensor(n)}


def _torch_layers(spec: ModelSpec, folder: Path, per_layer: dict[int, Path]) -> list[tuple[TensorRef, TensorRef]]:
    _check_layer_set(spec, folder, set(per_layer), "model_{}.pt")
    layers = []
    for il in range(spec.n_layer):
        path = per_layer[il]
        tensors = read_torch_checkpoint(path)
        for name in tensors:
            if name not in ("fc1.weight", "fc2.weight"):
                raise ConvertError(path, "unexpected tensor: a predictor holds only the bias-free fc1.weight and fc2.weight", name)
        for name in ("fc1.weight", "fc2.weight"):
            if name not in tensors:
                raise ConvertError(path, "missing", name)
        layers.append(_checked(spec, tensors["fc1.weight"], tensors["fc2.weight"]))
    return layers


def _hf_layers(spec: ModelSpec, where: Path, tensors: dict[str, TensorRef]) -> list[tuple[TensorRef, TensorRef]]:
    found: dict[int, dict[str, TensorRef]] = {}
    for name, t in tensors.items():
        m = HF_NAME.match(name)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = t
    _check_layer_set(spec, where, set(found), "model.layers.{}.mlp.predictor")
    layers = []
    for il in range(spec.n_layer):
        for fc in ("fc1", "fc2"):
            if fc not in found[il]:
                raise ConvertError(where, "missing", f"model.layers.{il}.mlp.predictor.{fc}.weight")
        layers.append(_checked(spec, found[il]["fc1"], found[il]["fc2"]))
    return layers


def _check_layer_set(spec: ModelSpec, where: Path, layers: set[int], pattern: str) -> None:
    missing = sorted(set(range(spec.n_layer)) - layers)
    extra = sorted(layers - set(range(spec.n_layer)))
    if missing:
        raise ConvertError(where, f"predictor has {len(layers)} layers but the model has {spec.n_layer} (first missing: layer {missing[0]})", pattern.format(missing[0]))
    if extra:
        raise ConvertError(where, f"predictor has a layer {extra[0]} but the model has only {spec.n_layer} layers", pattern.format(extra[0]))


def _checked(spec: ModelSpec, fc1: TensorRef, fc2: TensorRef) -> tuple[TensorRef, TensorRef]:
    if len(fc1.shape) != 2 or fc1.shape[1] != spec.n_embd or not 1 <= fc1.shape[0] <= spec.n_ff:
        raise ConvertError(fc1.file, f"shape {list(fc1.shape)}, expected [rank, {spec.n_embd}] with 1 <= rank <= {spec.n_ff}", fc1.name)
    rank = fc1.shape[0]
    if list(fc2.shape) != [spec.n_ff, rank]:
        raise ConvertError(fc2.file, f"shape {list(fc2.shape)}, expected [{spec.n_ff}, {rank}] (n_ff, the rank of fc1)", fc2.name)
    return fc1, fc2


def _threshold(folder: Path) -> Optional[float]:
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(path, f"is not valid JSON ({e})") from None
    value = data.get("sparse_threshold") if isinstance(data, dict) else None
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConvertError(path, f"sparse_threshold {value!r} is not a number", "sparse_threshold")
    if not math.isfinite(value):  # json reads NaN and Infinity
        raise ConvertError(path, f"sparse_threshold {value!r} is not a finite number", "sparse_threshold")
    return float(value)
