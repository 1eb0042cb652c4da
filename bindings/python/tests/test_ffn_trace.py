"""Context.trace_ffn: every layer's FFN input and active neurons, checked against the
repository's NumPy forward pass (tests/reference/oracle.py, float64 from the file's weights)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import powerinfer
from powerinfer._context import FfnTrace

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "reference"))
import oracle  # noqa: E402

# "In the beginning God created the heaven and the earth." in the fixture's vocabulary, BOS first.
TOKENS = [1, 1064, 261, 2096, 395, 3588, 261, 740, 270, 261, 621, 4047]


@pytest.fixture(scope="module")
def dense_model(model_path: Path) -> Iterator[powerinfer.Model]:
    with powerinfer.Model(model_path, n_threads=2, dense=True) as m:
        yield m


def reference(path: Path, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the residual before ffn_norm and gate·xn of every token, from the oracle."""
    m = oracle.Model(str(path), use_predictor=False)
    pos = np.arange(len(tokens), dtype=np.float64)
    h = m.tok_embd[np.asarray(tokens)]
    inputs, gates = [], []
    for layer in m.layers:
        h = h + m.attention(layer, m.rms_norm(h, layer["attn_norm"]), pos)
        inputs.append(h)
        gates.append(m.rms_norm(h, layer["ffn_norm"]) @ layer["ffn_gate"].T)
        h = h + m.ffn(layer, m.rms_norm(h, layer["ffn_norm"]), h, None)
    return np.stack(inputs), np.stack(gates)


def test_shapes_and_dtypes(model: powerinfer.Model) -> None:
    info = model.info
    with model.create_context(n_ctx=64) as ctx:
        trace = ctx.trace_ffn(TOKENS)
        assert isinstance(trace, FfnTrace)
        assert trace.inputs.shape == (info.n_layer, len(TOKENS), info.n_embd)
        assert trace.inputs.dtype == np.float32
        assert trace.active.shape == (info.n_layer, len(TOKENS), info.n_ff)
        assert trace.active.dtype == np.bool_
        assert trace.activations is None
        assert ctx.n_past == len(TOKENS)
        full = ctx.trace_ffn(np.asarray(TOKENS, dtype=np.int64), activations=True)
        assert full.activations is not None
        assert full.activations.dtype == np.float32
        assert full.activations.shape == full.active.shape
        np.testing.assert_array_equal(full.active, full.activations != 0)
        # The cache was cleared first: the same tokens give the same trace.
        np.testing.assert_array_equal(full.inputs, trace.inputs)
        assert ctx.n_past == len(TOKENS)


def test_the_trace_matches_the_numpy_forward_pass(
    dense_model: powerinfer.Model, model_path: Path
) -> None:
    inputs, gates = reference(model_path, TOKENS)
    with dense_model.create_context(n_ctx=64, kv_f16=False) as ctx:
        trace = ctx.trace_ffn(TOKENS)
    scale = np.abs(inputs).max()
    assert np.abs(trace.inputs - inputs).max() <= 1e-3 * scale
    # ReGLU: a neuron fires iff gate·xn > 0; the two sides may round a gate at zero apart.
    truly = gates > 0
    differ = trace.active != truly
    assert np.all(np.abs(gates[differ]) < 1e-4 * np.abs(gates).max())
    assert differ.mean() < 1e-3


def test_the_true_active_fraction_is_the_synthetic_sparsity(
    dense_model: powerinfer.Model, model: powerinfer.Model
) -> None:
    sparsity = powerinfer.synthetic_model_defaults()["sparsity"]
    with dense_model.create_context(n_ctx=64) as ctx:
        truly = ctx.trace_ffn(TOKENS).active
    assert abs(truly.mean() - (1 - sparsity)) < 0.05
    # The synthetic predictor is exact: sparse inference computes the same active neurons, and
    # never one the dense run calls idle.
    with model.create_context(n_ctx=64) as ctx:
        selected = ctx.trace_ffn(TOKENS).active
    assert not np.any(selected & ~truly)
    assert selected.sum() >= 0.99 * truly.sum()


def test_chunks_of_n_batch_give_the_trace_of_one_batch(model: powerinfer.Model) -> None:
    with model.create_context(n_ctx=64, kv_f16=False) as whole:
        one = whole.trace_ffn(TOKENS)
    with model.create_context(n_ctx=64, n_batch=5, kv_f16=False) as chunked:
        parts = chunked.trace_ffn(TOKENS)
    np.testing.assert_allclose(parts.inputs, one.inputs, rtol=0, atol=1e-4 * np.abs(one.inputs).max())
    assert (parts.active != one.active).mean() < 1e-3


def test_bad_tokens_are_refused_and_the_context_stays_usable(model: powerinfer.Model) -> None:
    with model.create_context(n_ctx=16) as ctx:
        with pytest.raises(powerinfer.InvalidArgumentError, match="at least one token"):
            ctx.trace_ffn([])
        with pytest.raises(powerinfer.InvalidArgumentError, match=r"token 2 has id -1"):
            ctx.trace_ffn([1, 1064, -1])
        with pytest.raises(powerinfer.InvalidArgumentError, match="outside the vocabulary"):
            ctx.trace_ffn([1, model.n_vocab])
        with pytest.raises(powerinfer.InvalidArgumentError, match="1-D"):
            ctx.trace_ffn([[1, 2], [3, 4]])
        with pytest.raises(powerinfer.InvalidArgumentError, match="integer ids"):
            ctx.trace_ffn([1.5, 2.0])
        with pytest.raises(powerinfer.ContextFullError):
            ctx.trace_ffn([1] * 17)
        assert ctx.trace_ffn(TOKENS[:4]).inputs.shape[1] == 4
        ctx.eval([263])
        assert ctx.n_past == 5


def test_hot_neurons_on_an_offload_device_are_unsupported(
    tmp_path: Path, model_path: Path
) -> None:
    path = tmp_path / model_path.name  # keeps the planner's cached plan out of other tests
    shutil.copyfile(model_path, path)
    with powerinfer.Model(path, offload_device="cpu", vram_budget=32 * 2**20) as m:
        assert sum(m.info.hot_neurons) > 0
        with m.create_context(n_ctx=32) as ctx:
            with pytest.raises(powerinfer.UnsupportedError, match="offload"):
                ctx.trace_ffn(TOKENS)
            assert ctx.eval(TOKENS).shape == (m.n_vocab,)
