"""Offloading: the offload keyword arguments of Model and the placement ModelInfo reports.

offload_device="cpu" is a second CPU backend instance limited to vram_budget bytes: the hybrid
path without a GPU, so these tests run everywhere.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import powerinfer

# Fits the tiny model whole: two 1 MB vocabulary matrices, small layers, the KV cache below.
BUDGET = 32 * 2**20
KV_N_CTX = 64


@pytest.fixture(scope="module")
def own_model_path(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    # The planner caches its plan beside the model (<model>.generated.gpuidx): a copy keeps
    # that file out of the other tests' folder.
    path = tmp_path_factory.mktemp("offload") / model_path.name
    shutil.copyfile(model_path, path)
    return path


def load(path: Path, **options: Any) -> powerinfer.Model:
    return powerinfer.Model(path, n_threads=2, **options)


def greedy(model: powerinfer.Model, n_ctx: int = 512) -> str:
    with model.create_context(n_ctx=n_ctx) as ctx:
        return ctx.generate("Once upon a time", max_tokens=12, temperature=0)


def test_cpu_offload_gives_the_cpu_text_and_reports_the_placement(
    own_model_path: Path, model: powerinfer.Model
) -> None:
    with load(own_model_path, offload_device="cpu", vram_budget=BUDGET, kv_n_ctx=KV_N_CTX,
              reset_gpu_index=True) as offloaded:
        info = offloaded.info
        assert info.offload_device.startswith("cpu")
        assert 0 < info.offload_bytes <= BUDGET
        assert len(info.hot_neurons) == len(info.attn_on_device) == info.n_layer
        assert len(info.predictor_on_device) == info.n_layer
        assert all(0 <= n <= info.n_ff for n in info.hot_neurons) and sum(info.hot_neurons) > 0
        assert info.attn_on_device[0] is True
        assert all(isinstance(flag, bool) for flag in info.predictor_on_device)
        assert isinstance(info.output_on_device, bool)
        assert info.kv_n_ctx_on_device == KV_N_CTX
        assert greedy(offloaded, n_ctx=KV_N_CTX) == greedy(model, n_ctx=KV_N_CTX)


def test_a_model_without_offload_reports_nothing_on_a_device(model: powerinfer.Model) -> None:
    info = model.info
    assert (info.offload_device, info.offload_bytes, info.kv_n_ctx_on_device) == ("", 0, 0)
    assert info.hot_neurons == (0,) * info.n_layer
    assert info.attn_on_device == info.predictor_on_device == (False,) * info.n_layer
    assert info.output_on_device is False


def test_disabled_gpu_index_keeps_neurons_on_the_cpu_but_offloads_attention(
    own_model_path: Path,
) -> None:
    with load(own_model_path, offload_device="cpu", vram_budget=BUDGET,
              disable_gpu_index=True) as m:
        assert m.info.hot_neurons == (0,) * m.info.n_layer
        assert all(m.info.attn_on_device)
        assert m.info.kv_n_ctx_on_device == 0


def test_offload_device_none_and_a_zero_budget_offload_nothing(own_model_path: Path) -> None:
    for options in ({"offload_device": "none"}, {"offload_device": "cpu", "vram_budget": 0}):
        with load(own_model_path, **options) as m:
            assert m.info.offload_device == "" and m.info.offload_bytes == 0


def test_cpu_offload_without_a_budget_names_vram_budget(own_model_path: Path) -> None:
    for budget in (None, -1.0):
        with pytest.raises(powerinfer.InvalidArgumentError, match="vram_budget"):
            load(own_model_path, offload_device="cpu", vram_budget=budget)


def test_unknown_offload_device_is_named_in_the_error(own_model_path: Path) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="'tpu'"):
        load(own_model_path, offload_device="tpu")


@pytest.mark.parametrize("kv_n_ctx", [-1, 2**31])
def test_kv_n_ctx_out_of_range_is_rejected(own_model_path: Path, kv_n_ctx: int) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="kv_n_ctx"):
        load(own_model_path, offload_device="cpu", vram_budget=BUDGET, kv_n_ctx=kv_n_ctx)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"offload_device": 1}, id="offload-device-int"),
        pytest.param({"kv_n_ctx": "64"}, id="kv-n-ctx-str"),
        pytest.param({"kv_n_ctx": 64.0}, id="kv-n-ctx-float"),
        pytest.param({"vram_budget": "32M"}, id="vram-budget-str"),
    ],
)
def test_offload_arguments_of_the_wrong_type_raise_type_error(
    own_model_path: Path, options: dict[str, object]
) -> None:
    with pytest.raises(TypeError):
        load(own_model_path, **options)


def test_nan_budget_is_rejected(own_model_path: Path) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="vram_budget"):
        load(own_model_path, offload_device="cpu", vram_budget=float("nan"))


def test_nul_in_the_activation_statistics_path_is_rejected(own_model_path: Path) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="NUL"):
        load(own_model_path, offload_device="cpu", vram_budget=BUDGET, activation_stats="a\0b")


def test_missing_activation_statistics_surface_the_library_error(
    own_model_path: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-stats.gguf"
    with pytest.raises(powerinfer.FileError) as caught:
        load(own_model_path, offload_device="cpu", vram_budget=BUDGET, reset_gpu_index=True,
             activation_stats=missing)
    assert str(missing) in str(caught.value)


def test_sequences_and_saved_state_with_the_kv_cache_on_the_device(
    own_model_path: Path, model: powerinfer.Model
) -> None:
    a = model.tokenize("And God said")
    b = model.tokenize("The quick brown fox")
    seq_ids = [0] * len(a) + [1] * len(b)
    with model.create_context(n_ctx=KV_N_CTX, n_seq_max=2) as host:
        expected = host.decode(a + b, seq_ids=seq_ids)
    with load(own_model_path, offload_device="cpu", vram_budget=BUDGET,
              kv_n_ctx=KV_N_CTX) as hybrid:
        with hybrid.create_context(n_ctx=KV_N_CTX, n_seq_max=2) as ctx, hybrid.create_context(
                n_ctx=KV_N_CTX, n_seq_max=2) as copy:
            rows = ctx.decode(a + b, seq_ids=seq_ids)
            assert abs(rows - expected).max() < 1e-2
            copy.load_state(ctx.save_state())
            step = model.tokenize(" and", add_bos=False)[:1]
            assert (ctx.decode(step, seq_ids=[1]) == copy.decode(step, seq_ids=[1])).all()
