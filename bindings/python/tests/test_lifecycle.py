"""Deterministic freeing: close(), context managers, lifetimes across objects and GC."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import powerinfer


def test_closed_model_and_context_refuse_calls(model_path: Path) -> None:
    model = powerinfer.Model(model_path)
    ctx = model.create_context()
    ctx.close()
    ctx.close()
    assert ctx.closed
    with pytest.raises(ValueError, match="closed"):
        ctx.generate("Hi")
    model.close()
    model.close()
    assert model.closed
    with pytest.raises(ValueError, match="closed"):
        model.tokenize("Hi")
    with pytest.raises(ValueError, match="closed"):
        model.create_context()


def test_with_blocks_close_model_and_context(model_path: Path) -> None:
    with powerinfer.Model(model_path) as model:
        with model.create_context() as ctx:
            ctx.generate("Hi", max_tokens=2, temperature=0)
        assert ctx.closed and not model.closed
    assert model.closed


def test_contexts_outlive_a_closed_model(model_path: Path) -> None:
    model = powerinfer.Model(model_path)
    ctx = model.create_context()
    expected = ctx.generate("Hi", max_tokens=8, temperature=0)
    model.close()
    assert ctx.generate("Hi", max_tokens=8, temperature=0) == expected
    ctx.close()


def test_a_context_keeps_its_model_alive(model_path: Path) -> None:
    def make() -> powerinfer.Context:
        return powerinfer.Model(model_path).create_context()

    ctx = make()
    gc.collect()
    assert not ctx.model.closed
    assert ctx.generate("Hi", max_tokens=4, temperature=0) is not None


def test_a_logits_view_outlives_its_context(model: powerinfer.Model) -> None:
    ctx = model.create_context()
    view = ctx.eval([1, 300])
    expected = view.copy()
    ctx.close()
    del ctx
    gc.collect()
    assert (view == expected).all()


def test_dropping_objects_in_any_order_is_safe(model_path: Path) -> None:
    for order in range(3):
        model = powerinfer.Model(model_path)
        ctx = model.create_context()
        stream = ctx.stream("Once upon a time", max_tokens=100, temperature=0)
        next(stream)
        objects = [model, ctx, stream]
        del model, ctx, stream
        for i in (order, (order + 1) % 3, (order + 2) % 3):
            objects[i] = None  # type: ignore[call-overload]
            gc.collect()


def test_breaking_out_of_a_stream_frees_the_context(ctx: powerinfer.Context) -> None:
    for piece in ctx.stream("Once upon a time", max_tokens=100, temperature=0):
        break
    assert ctx.generate("Hi", max_tokens=2, temperature=0) is not None


def test_closing_a_context_stops_its_stream(ctx: powerinfer.Context) -> None:
    stream = ctx.stream("Once upon a time", max_tokens=400, temperature=0)
    next(stream)
    ctx.close()
    rest = list(stream)
    assert stream.result is not None
    assert stream.result.n_generated_tokens < 400 and len(rest) < 399
