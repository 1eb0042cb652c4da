"""pi_status failures become powerinfer.Error subclasses carrying the library's message."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

import powerinfer


def test_missing_file_is_a_file_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model.gguf"
    with pytest.raises(powerinfer.FileError) as caught:
        powerinfer.Model(missing)
    assert str(missing) in str(caught.value)
    assert isinstance(caught.value, OSError) and isinstance(caught.value, powerinfer.Error)
    assert caught.value.status == -2 and caught.value.status_name == "PI_ERR_IO"


def test_garbage_file_is_a_format_error(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"this is not a model file at all" * 10)
    with pytest.raises(powerinfer.FormatError):
        powerinfer.Model(bad)


def test_truncated_model_is_a_format_error(tmp_path: Path, model_path: Path) -> None:
    cut = tmp_path / "truncated.gguf"
    cut.write_bytes(model_path.read_bytes()[:100_000])
    with pytest.raises(powerinfer.FormatError) as caught:
        powerinfer.Model(cut)
    assert caught.value.status_name == "PI_ERR_FORMAT" and str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m, c: c.eval([]), id="eval-no-tokens"),
        pytest.param(lambda m, c: c.eval([1, m.n_vocab]), id="eval-token-outside-vocabulary"),
        pytest.param(lambda m, c: c.eval([-3]), id="eval-negative-token"),
        pytest.param(lambda m, c: c.generate("Hi", max_tokens=-1), id="negative-max-tokens"),
        pytest.param(lambda m, c: c.generate("Hi", seed=-1), id="negative-seed"),
        pytest.param(lambda m, c: c.generate("Hi", seed=2**32), id="seed-too-large"),
        pytest.param(lambda m, c: c.generate("a\0b"), id="nul-in-prompt"),
        pytest.param(lambda m, c: c.generate("Hi", stop=["x\0"]), id="nul-in-stop-string"),
        pytest.param(lambda m, c: c.logits(), id="logits-before-eval"),
        pytest.param(lambda m, c: c.truncate(-1), id="negative-truncate"),
        pytest.param(lambda m, c: m.create_context(n_ctx=-5), id="negative-n-ctx"),
        pytest.param(lambda m, c: m.create_context(n_threads=0), id="zero-threads"),
    ],
)
def test_bad_arguments_raise_invalid_argument_error(
    model: powerinfer.Model,
    ctx: powerinfer.Context,
    call: Callable[[powerinfer.Model, powerinfer.Context], object],
) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError) as caught:
        call(model, ctx)
    assert isinstance(caught.value, ValueError) and str(caught.value)


def test_unknown_activation_is_rejected(model_path: Path) -> None:
    with pytest.raises(ValueError, match="ffn_activation"):
        powerinfer.Model(model_path, ffn_activation="tanh")  # type: ignore[arg-type]


def test_wrong_types_raise_type_error(ctx: powerinfer.Context) -> None:
    with pytest.raises(TypeError):
        ctx.generate(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ctx.eval(["a"])  # type: ignore[list-item]


def test_prompt_longer_than_the_context_is_context_full(model: powerinfer.Model) -> None:
    with model.create_context(n_ctx=8) as small:
        with pytest.raises(powerinfer.ContextFullError, match="n_ctx"):
            small.generate("one two three four five six seven eight nine ten eleven")
        with pytest.raises(powerinfer.ContextFullError):
            small.eval(list(range(1, 12)))


def test_a_busy_context_refuses_a_second_call(ctx: powerinfer.Context) -> None:
    with ctx.stream("Once upon a time", max_tokens=50, temperature=0) as stream:
        next(stream)
        with pytest.raises(powerinfer.InvalidArgumentError, match="in use"):
            ctx.generate("Hi")
    assert ctx.generate("Hi", max_tokens=2, temperature=0) is not None


def test_synthetic_model_with_a_missing_vocabulary_names_it(tmp_path: Path) -> None:
    with pytest.raises(powerinfer.Error, match="nowhere.gguf"):
        powerinfer.make_synthetic_model(tmp_path / "m.gguf", tmp_path / "nowhere.gguf")
