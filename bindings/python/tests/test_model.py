"""Loading: model info, options, the progress callback, version and system information."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import powerinfer
from conftest import TINY


def test_info_describes_the_synthetic_model(model: powerinfer.Model) -> None:
    info = model.info
    assert info.architecture == "llama"
    assert (info.n_embd, info.n_layer, info.n_head, info.n_head_kv, info.n_ff) == (
        TINY["n_embd"], TINY["n_layer"], TINY["n_head"], TINY["n_head"], TINY["n_ff"])
    assert info.n_vocab == model.n_vocab == 4096
    assert info.sparse and info.sparse_inference
    assert info.ffn_activation == "relu"
    assert len(info.predictor_rank) == info.n_layer and all(r > 0 for r in info.predictor_rank)
    assert info.weight_type == "F32"
    assert info.file_size > 0 and info.n_params > 0


def test_dense_option_turns_off_sparse_inference(model_path: Path) -> None:
    with powerinfer.Model(model_path, dense=True) as m:
        assert m.info.sparse and not m.info.sparse_inference


def test_progress_callback_sees_rising_values_ending_at_one(model_path: Path) -> None:
    seen: list[float] = []
    with powerinfer.Model(model_path, progress=seen.append):
        pass
    assert seen and seen[-1] == 1.0
    assert all(0.0 <= a <= b <= 1.0 for a, b in zip(seen, seen[1:]))


def test_progress_callback_returning_false_cancels_loading(model_path: Path) -> None:
    with pytest.raises(powerinfer.CancelledError):
        powerinfer.Model(model_path, progress=lambda p: False)


def test_progress_callback_exception_propagates(model_path: Path) -> None:
    def boom(p: float) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        powerinfer.Model(model_path, progress=boom)


def test_loading_without_mmap_gives_the_same_text(
    model_path: Path, model: powerinfer.Model
) -> None:
    with powerinfer.Model(model_path, use_mmap=False) as copy:
        with copy.create_context() as a, model.create_context() as b:
            assert a.generate("Hi", max_tokens=8, temperature=0) == b.generate(
                "Hi", max_tokens=8, temperature=0)


def test_version_matches_the_library_and_the_distribution() -> None:
    assert powerinfer.__version__.count(".") == 2
    assert f"libpowerinfer {powerinfer.__version__}" in powerinfer.system_info()
    try:
        assert importlib.metadata.version("powerinfer") == powerinfer.__version__
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("powerinfer is not installed as a distribution")


def test_system_info_names_the_cpu_backend() -> None:
    assert "CPU backend" in powerinfer.system_info()


def test_synthetic_model_defaults_list_the_generator_options() -> None:
    defaults = powerinfer.synthetic_model_defaults()
    assert {"n_embd", "n_layer", "n_ff", "sparsity", "seed"} <= defaults.keys()


def test_an_installed_wheel_uses_its_bundled_library() -> None:
    package = Path(powerinfer.__file__).resolve().parent
    bundled = sorted(package.glob("libpowerinfer.so.*"))
    if not bundled:
        pytest.skip("not installed from a wheel: no bundled libpowerinfer.so")
    maps = Path("/proc/self/maps").read_text()
    loaded = {Path(line.split()[-1]).resolve() for line in maps.splitlines()
              if "/libpowerinfer.so" in line}
    assert loaded == {bundled[0].resolve()}
