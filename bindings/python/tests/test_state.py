"""Saved state: a restored context continues bit-identically; bad state is refused and changes
nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import powerinfer

PROMPT = "Once upon a time"


def draw(ctx: powerinfer.Context, sampler: powerinfer.Sampler, n: int) -> list[int]:
    """n tokens sampled from ctx.logits() and fed back."""
    out = []
    for _ in range(n):
        token = sampler.sample(ctx.logits())
        ctx.eval([token])
        out.append(token)
    return out


def test_a_restored_context_and_sampler_continue_bit_identically(
    model: powerinfer.Model,
) -> None:
    settings = dict(temperature=1.0, repeat_penalty=1.2, seed=17)
    with model.create_context() as a, model.create_context() as b:
        sa = powerinfer.Sampler(model, **settings)
        a.eval(model.tokenize(PROMPT))
        draw(a, sa, 4)
        state = a.save_state(sampler=sa)
        assert isinstance(state, bytes) and state
        expected = draw(a, sa, 8)
        logits_a = a.logits().copy()

        sb = powerinfer.Sampler(model, **settings)
        b.load_state(state, sampler=sb)
        assert b.n_past == a.n_past - 8
        assert draw(b, sb, 8) == expected
        np.testing.assert_array_equal(b.logits(), logits_a)


def test_generation_continues_after_a_load(model: powerinfer.Model) -> None:
    with model.create_context() as a, model.create_context() as b:
        a.generate(PROMPT, max_tokens=6, temperature=0)
        b.load_state(a.save_state())
        follow = " and then"
        assert b.generate(PROMPT + follow, max_tokens=8, temperature=0) == a.generate(
            PROMPT + follow, max_tokens=8, temperature=0)


def test_state_files_round_trip(model: powerinfer.Model, tmp_path: Path) -> None:
    path = tmp_path / "chat.state"
    ids = model.tokenize(PROMPT)
    with model.create_context() as a, model.create_context() as b:
        a.eval(ids)
        a.save_state_file(path)
        assert path.stat().st_size > 0
        b.load_state_file(str(path))
        np.testing.assert_array_equal(b.logits(), a.logits())
        more = model.tokenize(" there", add_bos=False)
        np.testing.assert_array_equal(a.eval(more).copy(), b.eval(more))
    with model.create_context() as c, pytest.raises(powerinfer.FileError):
        c.load_state_file(tmp_path / "missing.state")


def test_bad_state_is_a_format_error_and_changes_nothing(
    model: powerinfer.Model, tmp_path: Path, vocab_path: Path
) -> None:
    with model.create_context() as a, model.create_context() as b:
        a.eval(model.tokenize(PROMPT))
        state = a.save_state()
        b.eval(model.tokenize("And God said"))
        before = (b.n_past, b.logits().copy())
        for bad in (state[: len(state) // 2], b"", b"\0" * 64, state[:-1]):
            with pytest.raises(powerinfer.FormatError):
                b.load_state(bad)
            assert b.n_past == before[0]
        np.testing.assert_array_equal(b.logits(), before[1])
        with pytest.raises(TypeError):
            b.load_state("state")  # type: ignore[arg-type]

    other_path = powerinfer.make_synthetic_model(
        tmp_path / "other.gguf", vocab_path, n_embd=32, n_layer=2, n_head=2, n_ff=96, seed=8)
    with powerinfer.Model(other_path) as other, other.create_context() as c:
        with pytest.raises(powerinfer.FormatError):
            c.load_state(state)


def test_one_sequence_loads_into_another_id(model: powerinfer.Model) -> None:
    ids = model.tokenize("In the beginning")
    with model.create_context(n_seq_max=2) as a, model.create_context(n_seq_max=2) as b:
        a.decode(ids)
        b.load_state(a.save_state(seq_id=0), seq_id=1)
        assert b.kv_seq_pos_max(1) == len(ids) - 1 and b.kv_seq_pos_max(0) == -1
        with pytest.raises(powerinfer.InvalidArgumentError):
            b.load_state(a.save_state(seq_id=0), seq_id=2)


def test_a_state_too_big_for_the_context_is_context_full(model: powerinfer.Model) -> None:
    ids = model.tokenize("And God said let there be light and there was light " * 4)
    with model.create_context(n_ctx=256) as big, model.create_context(n_ctx=16) as small:
        big.eval(ids)
        with pytest.raises(powerinfer.ContextFullError):
            small.load_state(big.save_state())
