"""The tensors of a Hugging Face model folder, from whichever layout it has: model.safetensors,
shards listed by model.safetensors.index.json, pytorch_model.bin, or shards listed by
pytorch_model.bin.index.json. Only headers are read here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from .errors import ConvertError
from .safetensors_reader import read_safetensors
from .tensor_source import TensorRef
from .torch_checkpoint import read_torch_checkpoint

Reader = Callable[[Path], dict[str, TensorRef]]

# (single file, index of shards, reader), in order of preference.
LAYOUTS: list[tuple[str, str, Reader]] = [
    ("model.safetensors", "model.safetensors.index.json", read_safetensors),
    ("pytorch_model.bin", "pytorch_model.bin.index.json", read_torch_checkpoint),
]


def read_checkpoint(folder: Path) -> dict[str, TensorRef]:
    """All tensors of the model in `folder` by name; ConvertError naming what is missing."""
    for single, index, reader in LAYOUTS:
        if (folder / index).is_file():
            return _read_sharded(folder / index, reader)
        if (folder / single).is_file():
            return reader(folder / single)
    unindexed = sorted(folder.glob("model-*-of-*.safetensors"))
    if unindexed:
        raise ConvertError(folder / "model.safetensors.index.json", f"missing: the folder has {len(unindexed)} safetensors shards but not their index")
    raise ConvertError(folder, "has no model.safetensors, model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json")


def _read_sharded(index: Path, reader: Reader) -> dict[str, TensorRef]:
    weight_map = _weight_map(index)
    shards: dict[str, dict[str, TensorRef]] = {}
    tensors: dict[str, TensorRef] = {}
    for name, shard in weight_map.items():
        if shard not in shards:
            path = index.parent / shard
            if not path.is_file():
                raise ConvertError(index, f"shard {shard} is missing", name)
            shards[shard] = reader(path)
        found = shards[shard].get(name)
        if found is None:
            raise ConvertError(index.parent / shard, f"is not in this shard, where {index.name} puts it", name)
        tensors[name] = found
    for shard, held in shards.items():
        for name in held:
            if name not in weight_map:
                raise ConvertError(index.parent / shard, f"is not listed in {index.name}", name)
    return tensors


def _weight_map(index: Path) -> dict[str, str]:
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(index, f"is not valid JSON ({e})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise ConvertError(index, "has no weight_map of tensor name -> shard file")
    for shard in set(weight_map.values()):
        if Path(shard).name != shard:
            raise ConvertError(index, f"shard name {shard!r} is not a file name in the model folder")
    return weight_map
