"""Generation, streaming, evaluation and logits."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import powerinfer

PROMPT = "Once upon a time"


def test_greedy_generation_equals_the_cli(model_path: Path, model: powerinfer.Model) -> None:
    cli = os.environ.get("POWERINFER_CLI")
    if not cli:
        pytest.skip("POWERINFER_CLI is not set")
    n = 48
    run = subprocess.run(
        [cli, "-m", str(model_path), "-p", PROMPT, "-n", str(n), "--temp", "0", "-t", "2"],
        capture_output=True, check=True, timeout=120)
    with model.create_context(n_threads=2) as ctx:
        text = ctx.generate(PROMPT, max_tokens=n, temperature=0)
    # The tiny model's random weights can emit byte tokens that are not valid UTF-8; the binding
    # hands such bytes over as U+FFFD, so the CLI's bytes are read the same way.
    assert run.stdout.decode(errors="replace") == PROMPT + text + "\n"


def test_streaming_yields_the_text_of_generate(ctx: powerinfer.Context) -> None:
    whole = ctx.generate(PROMPT, max_tokens=40, temperature=0)
    pieces = list(ctx.stream(PROMPT, max_tokens=40, temperature=0))
    assert pieces and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == whole


def test_seeded_sampling_repeats_and_streams_alike(ctx: powerinfer.Context) -> None:
    a = ctx.generate(PROMPT, max_tokens=30, temperature=1.0, seed=42)
    b = "".join(ctx.stream(PROMPT, max_tokens=30, temperature=1.0, seed=42))
    assert a == b


def test_context_seed_is_the_default_sampling_seed(model: powerinfer.Model) -> None:
    with model.create_context(seed=5) as c1, model.create_context(seed=5) as c2:
        assert c1.generate(PROMPT, max_tokens=20, temperature=1.0) == c2.generate(
            PROMPT, max_tokens=20, temperature=1.0)


def test_max_tokens_bounds_the_generation(ctx: powerinfer.Context) -> None:
    ctx.generate(PROMPT, max_tokens=7, temperature=0)
    result = ctx.last_result
    assert result is not None
    assert result.n_generated_tokens <= 7
    assert result.stop_reason in ("max_tokens", "eos")
    assert result.n_prompt_tokens == len(ctx.model.tokenize(PROMPT))


def test_stop_string_ends_the_text_before_it(ctx: powerinfer.Context) -> None:
    full = ctx.generate(PROMPT, max_tokens=40, temperature=0)
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    cut = ctx.generate(PROMPT, max_tokens=40, temperature=0, stop=[stop])
    assert cut == full[: full.index(stop)]
    assert ctx.last_result is not None and ctx.last_result.stop_reason == "stop_string"


def test_stream_result_is_set_once_exhausted(ctx: powerinfer.Context) -> None:
    stream = ctx.stream(PROMPT, max_tokens=5, temperature=0)
    assert stream.result is None or stream.result.n_generated_tokens <= 5
    list(stream)
    assert stream.result is not None and ctx.last_result == stream.result


def test_two_contexts_in_two_threads_give_the_same_greedy_text(model: powerinfer.Model) -> None:
    expected = model.create_context().generate(PROMPT, max_tokens=32, temperature=0)
    results: list[str] = ["", ""]

    def work(i: int) -> None:
        with model.create_context(n_threads=1) as c:
            results[i] = c.generate(PROMPT, max_tokens=32, temperature=0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected, expected]


def test_logits_are_a_read_only_float32_vector_of_n_vocab(ctx: powerinfer.Context) -> None:
    logits = ctx.eval(ctx.model.tokenize(PROMPT))
    assert logits.shape == (ctx.model.n_vocab,)
    assert logits.dtype == np.float32
    assert not logits.flags.writeable
    assert np.isfinite(logits).all()
    assert np.array_equal(ctx.logits(), logits)


def test_argmax_of_the_logits_is_the_first_greedy_token(ctx: powerinfer.Context) -> None:
    best = int(np.argmax(ctx.eval(ctx.model.tokenize(PROMPT))))
    piece = ctx.model.token_to_piece(best).decode("utf-8", errors="replace")
    assert ctx.generate(PROMPT, max_tokens=1, temperature=0) == piece


def test_eval_continues_after_the_cached_tokens(model: powerinfer.Model) -> None:
    ids = model.tokenize("The quick brown fox jumps over the lazy dog")
    with model.create_context() as whole, model.create_context(n_batch=3) as parts:
        expected = whole.eval(ids).copy()
        parts.eval(ids[:4])
        assert parts.n_past == 4
        got = parts.eval(ids[4:])
        assert parts.n_past == len(ids)
        # Same computation, other batch shapes: equal up to float rounding.
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_logits_view_shows_the_latest_eval(ctx: powerinfer.Context) -> None:
    view = ctx.eval(ctx.model.tokenize("Hello"))
    kept = view.copy()
    ctx.reset()
    newer = ctx.eval(ctx.model.tokenize("Goodbye"))
    assert np.array_equal(view, newer) and not np.array_equal(kept, newer)


def test_generate_resets_the_logits(ctx: powerinfer.Context) -> None:
    ctx.eval([1, 300])
    ctx.generate(PROMPT, max_tokens=2, temperature=0)
    with pytest.raises(powerinfer.InvalidArgumentError, match="eval"):
        ctx.logits()


def test_stats_count_prompt_and_decode_tokens(ctx: powerinfer.Context) -> None:
    ctx.reset_stats()
    ctx.generate(PROMPT, max_tokens=6, temperature=0)
    stats = ctx.stats()
    assert stats.n_prompt_tokens == len(ctx.model.tokenize(PROMPT))
    assert 1 <= stats.n_decode_tokens <= 6
    assert 0.0 < stats.ffn_active_fraction < 0.5
