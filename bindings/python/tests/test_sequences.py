"""Several sequences in one context: multi-sequence batches and per-sequence cache edits."""

from __future__ import annotations

import numpy as np
import pytest

import powerinfer

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture
def multi(model: powerinfer.Model):
    with model.create_context(n_ctx=256, n_seq_max=4) as c:
        yield c


def test_n_seq_max_is_reported_and_checked(model: powerinfer.Model, multi) -> None:
    assert multi.n_seq_max == 4
    with pytest.raises(powerinfer.InvalidArgumentError, match="n_seq_max"):
        model.create_context(n_seq_max=0)
    with pytest.raises(powerinfer.InvalidArgumentError, match="n_seq_max"):
        model.create_context(n_seq_max=65)


def test_two_sequences_in_one_batch_equal_each_alone(model: powerinfer.Model, multi) -> None:
    a = model.tokenize("And God said")
    b = model.tokenize("The quick brown fox jumps")
    rows = multi.decode(a + b, seq_ids=[0] * len(a) + [1] * len(b))
    assert rows.shape == (2, model.n_vocab) and rows.dtype == np.float32
    with model.create_context(n_ctx=256) as alone:
        np.testing.assert_allclose(rows[0], alone.eval(a), **TOL)
        alone.reset()
        np.testing.assert_allclose(rows[1], alone.eval(b), **TOL)
    assert multi.kv_seq_pos_max(0) == len(a) - 1
    assert multi.kv_seq_pos_max(1) == len(b) - 1
    assert multi.kv_seq_pos_min(2) == -1
    np.testing.assert_array_equal(multi.logits(), rows[1])


def test_logit_flags_choose_the_rows(model: powerinfer.Model, multi) -> None:
    ids = model.tokenize("And God said let there be light")
    flags = [i in (2, len(ids) - 1) for i in range(len(ids))]
    rows = multi.decode(ids, logits=flags)
    assert rows.shape == (2, model.n_vocab)
    with model.create_context(n_ctx=256) as alone:
        np.testing.assert_allclose(rows[0], alone.eval(ids[:3]), **TOL)
        np.testing.assert_allclose(rows[1], alone.eval(ids[3:]), **TOL)


def test_a_copied_prefix_is_shared_without_recomputing(model: powerinfer.Model, multi) -> None:
    prefix = model.tokenize("In the beginning God created")
    multi.decode(prefix)
    used = multi.kv_n_used_cells
    multi.reset_stats()
    multi.kv_seq_copy(0, 1)
    assert multi.kv_n_used_cells == used
    assert multi.stats().n_prompt_tokens == 0
    assert (multi.kv_seq_pos_min(1), multi.kv_seq_pos_max(1)) == (0, len(prefix) - 1)
    nxt = model.tokenize(" the", add_bos=False)[:1] * 2
    rows = multi.decode(nxt, seq_ids=[0, 1])
    np.testing.assert_allclose(rows[0], rows[1], **TOL)


def test_remove_keep_and_shift_edit_one_sequence(model: powerinfer.Model, multi) -> None:
    ids = model.tokenize("And God said let there be light")
    n = len(ids)
    multi.decode(ids + ids, seq_ids=[0] * n + [1] * n)
    multi.kv_seq_remove(1, 3, -1)
    assert multi.kv_seq_pos_max(1) == 2 and multi.kv_seq_pos_max(0) == n - 1
    multi.kv_seq_shift(0, 2, -1, 5)
    assert multi.kv_seq_pos_max(0) == n - 1 + 5
    multi.kv_seq_keep(1)
    assert multi.kv_seq_pos_max(0) == -1 and multi.kv_seq_pos_max(1) == 2
    multi.kv_seq_remove()
    assert multi.kv_n_used_cells == 0


def test_generation_in_one_sequence_leaves_the_others(model: powerinfer.Model, multi) -> None:
    ids = model.tokenize("And God said")
    multi.decode(ids)
    multi.generate("Once upon a time", max_tokens=5, temperature=0, seq_id=2)
    assert multi.kv_seq_pos_max(0) == len(ids) - 1
    assert multi.kv_seq_pos_max(2) >= len(model.tokenize("Once upon a time")) - 1


def test_out_of_range_sequence_ids_are_refused(multi) -> None:
    for call in (
        lambda: multi.kv_seq_remove(4),
        lambda: multi.kv_seq_remove(-2),
        lambda: multi.kv_seq_copy(0, 4),
        lambda: multi.kv_seq_copy(-1, 1),
        lambda: multi.kv_seq_keep(-1),
        lambda: multi.kv_seq_shift(9, 0, -1, 1),
        lambda: multi.kv_seq_pos_min(4),
        lambda: multi.kv_seq_pos_max(-1),
        lambda: multi.decode([1, 300], seq_ids=[0, 4]),
        lambda: multi.save_state(seq_id=4),
        lambda: multi.generate("Hi", max_tokens=1, seq_id=4),
    ):
        with pytest.raises(powerinfer.InvalidArgumentError):
            call()


def test_bad_batches_are_refused(multi) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="at least one"):
        multi.decode([])
    with pytest.raises(powerinfer.InvalidArgumentError, match="seq_ids"):
        multi.decode([1, 300], seq_ids=[0])
    with pytest.raises(powerinfer.InvalidArgumentError, match="positions"):
        multi.decode([1, 300], positions=[0, 1, 2])
    with pytest.raises(powerinfer.InvalidArgumentError, match="logits"):
        multi.decode([1, 300], logits=[True])
    with pytest.raises(powerinfer.InvalidArgumentError):
        multi.decode([1, multi.model.n_vocab])


def test_a_full_cache_is_a_context_full_error(model: powerinfer.Model) -> None:
    with model.create_context(n_ctx=16, n_seq_max=2) as small:
        small.decode(list(range(1, 11)), seq_ids=[0] * 10)
        with pytest.raises(powerinfer.ContextFullError):
            small.decode(list(range(1, 11)), seq_ids=[1] * 10)
        assert small.kv_seq_pos_max(1) == -1 and small.kv_n_used_cells == 10
        with pytest.raises(powerinfer.ContextFullError):
            small.decode([5], positions=[16])


def test_context_shift_lets_generation_run_past_a_full_context(model: powerinfer.Model) -> None:
    no_eos = {model.info.eos: float("-inf")}
    with model.create_context(n_ctx=32) as small:
        small.generate("Once upon a time", max_tokens=60, temperature=0, logit_bias=no_eos)
        assert small.last_result is not None
        assert small.last_result.stop_reason == "context_full"
        assert small.last_result.n_context_shifts == 0
        small.generate("Once upon a time", max_tokens=60, temperature=0, logit_bias=no_eos,
                       context_shift=True, n_keep=4, reuse_cache=False)
        r = small.last_result
        assert r is not None and r.stop_reason == "max_tokens"
        assert r.n_generated_tokens == 60 and r.n_context_shifts >= 1
        assert small.kv_seq_pos_max(0) < 32
