"""The sampler chain: the Sampler class on hand-made logits, and the chain's settings in
generation (penalties, grammar, mirostat, logit bias, token log-probabilities)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import powerinfer

PROMPT = "Once upon a time"


def peaked(n_vocab: int, order: list[int]) -> np.ndarray:
    """Logits whose most likely tokens are `order`, in that order."""
    logits = np.full(n_vocab, -10.0, dtype=np.float32)
    for rank, token in enumerate(order):
        logits[token] = 10.0 - rank
    return logits


def test_greedy_sampler_picks_the_largest_logit(model: powerinfer.Model) -> None:
    with powerinfer.Sampler(temperature=0) as s:
        assert s.sample(peaked(model.n_vocab, [42, 7])) == 42


def test_logit_bias_can_forbid_the_best_token(model: powerinfer.Model) -> None:
    s = powerinfer.Sampler.create_for_model(model, temperature=0, logit_bias={42: -math.inf})
    assert s.sample(peaked(model.n_vocab, [42, 7, 9])) == 7


def test_a_logit_bias_needs_the_model(model: powerinfer.Model) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError):
        powerinfer.Sampler(temperature=0, logit_bias={42: 1.0})


def test_repeat_penalty_moves_the_pick_off_an_accepted_token(model: powerinfer.Model) -> None:
    logits = peaked(model.n_vocab, [42, 7])
    logits[7] = logits[42] - 0.1
    s = powerinfer.Sampler(temperature=0, repeat_penalty=2.0, penalty_last_n=8)
    s.accept(42)
    assert s.sample(logits) == 7


def test_seeded_samplers_draw_the_same_tokens(model: powerinfer.Model) -> None:
    rng = np.random.default_rng(0)
    rows = [rng.normal(size=model.n_vocab).astype(np.float32) for _ in range(20)]
    a = powerinfer.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=9)
    b = powerinfer.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=9)
    assert [a.sample(r) for r in rows] == [b.sample(r) for r in rows]


def test_saved_sampler_state_replays_the_same_draws(model: powerinfer.Model) -> None:
    rng = np.random.default_rng(1)
    rows = [rng.normal(size=model.n_vocab).astype(np.float32) for _ in range(10)]
    s = powerinfer.Sampler(temperature=1.0, repeat_penalty=1.3, seed=3)
    for r in rows[:3]:
        s.sample(r)
    state = s.save_state()
    assert isinstance(state, bytes) and state
    first = [s.sample(r) for r in rows[3:]]
    s.load_state(state)
    assert [s.sample(r) for r in rows[3:]] == first


def test_reset_restarts_the_draws(model: powerinfer.Model) -> None:
    rng = np.random.default_rng(2)
    rows = [rng.normal(size=model.n_vocab).astype(np.float32) for _ in range(8)]
    s = powerinfer.Sampler(temperature=1.0, seed=4)
    first = [s.sample(r) for r in rows]
    s.reset()
    assert [s.sample(r) for r in rows] == first


def test_bad_sampler_state_is_a_format_error_and_changes_nothing(model: powerinfer.Model) -> None:
    rng = np.random.default_rng(3)
    rows = [rng.normal(size=model.n_vocab).astype(np.float32) for _ in range(6)]
    s = powerinfer.Sampler(temperature=1.0, seed=5)
    state = s.save_state()
    with pytest.raises(powerinfer.FormatError):
        s.load_state(state[: len(state) // 2])
    with pytest.raises(powerinfer.FormatError):
        s.load_state(b"not a sampler state")
    other = powerinfer.Sampler(temperature=1.0, seed=5)
    assert [s.sample(r) for r in rows] == [other.sample(r) for r in rows]
    with pytest.raises(TypeError):
        s.load_state("text")  # type: ignore[arg-type]


def test_sample_rejects_bad_logits(model: powerinfer.Model) -> None:
    s = powerinfer.Sampler(temperature=0)
    with pytest.raises(powerinfer.InvalidArgumentError):
        s.sample(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(powerinfer.InvalidArgumentError):
        s.sample(np.zeros(0, dtype=np.float32))


def test_accept_and_the_model_argument_are_checked(model: powerinfer.Model) -> None:
    s = powerinfer.Sampler(model, temperature=0)
    for bad in (-1, model.n_vocab):
        with pytest.raises(powerinfer.InvalidArgumentError, match="vocabulary"):
            s.accept(bad)
    with pytest.raises(TypeError):
        s.accept(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="powerinfer.Model"):
        powerinfer.Sampler("model.gguf")  # type: ignore[arg-type]
    with pytest.raises(powerinfer.InvalidArgumentError, match="mirostat"):
        powerinfer.Sampler(mirostat_mode=5)
    with pytest.raises(powerinfer.InvalidArgumentError, match="JSON"):
        powerinfer.Sampler(model, json_schema="{not json")


def test_a_closed_sampler_raises_value_error() -> None:
    s = powerinfer.Sampler(temperature=0)
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(ValueError):
        s.sample(np.zeros(4, dtype=np.float32))


def test_a_malformed_grammar_names_its_line_and_column(model: powerinfer.Model) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match=r"(?i)line\D*2.*col"):
        powerinfer.Sampler(model, grammar='root ::= "a"\nitem ::= ( "b" ')
    with pytest.raises(powerinfer.InvalidArgumentError):
        powerinfer.Sampler(grammar='root ::= "a"')  # a grammar needs the vocabulary


def test_unknown_stage_names_and_clashing_aliases_are_refused() -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="unknown sampler 'top_q'"):
        powerinfer.Sampler(samplers=["top_k", "top_q"])
    with pytest.raises(powerinfer.InvalidArgumentError, match="same setting"):
        powerinfer.Sampler(penalty_last_n=32, repeat_last_n=64)
    with pytest.raises(TypeError):
        powerinfer.Sampler(temperature="hot")  # type: ignore[arg-type]
    with pytest.raises(powerinfer.InvalidArgumentError, match="NaN"):
        powerinfer.Sampler(min_p=float("nan"))


def test_a_grammar_constrains_the_generated_text(ctx: powerinfer.Context) -> None:
    text = ctx.generate(PROMPT, max_tokens=16, temperature=0.9, seed=1,
                        grammar='root ::= "yes" | "no"')
    assert text in ("yes", "no")


def test_a_json_schema_output_parses(ctx: powerinfer.Context) -> None:
    import json

    schema = {"type": "object", "properties": {"color": {"enum": ["red", "green"]}},
              "required": ["color"]}
    text = ctx.generate(PROMPT, max_tokens=48, temperature=0.9, seed=2, json_schema=schema)
    assert json.loads(text)["color"] in ("red", "green")


def test_penalties_change_a_greedy_generation(model: powerinfer.Model) -> None:
    with model.create_context() as ctx:
        plain = ctx.generate(PROMPT, max_tokens=40, temperature=0, reuse_cache=False)
        penalised = ctx.generate(PROMPT, max_tokens=40, temperature=0, reuse_cache=False,
                                 repeat_penalty=1.5, frequency_penalty=0.5,
                                 presence_penalty=0.5, penalty_last_n=-1)
    assert penalised != plain
    assert len(set(model.tokenize(penalised, add_bos=False))) >= len(
        set(model.tokenize(plain, add_bos=False)))


def test_every_chain_setting_runs_and_streams_like_generate(ctx: powerinfer.Context) -> None:
    settings = dict(
        max_tokens=24, temperature=0.9, top_k=30, top_p=0.9, seed=11, min_p=0.02,
        typical_p=0.95, repeat_penalty=1.1, repeat_last_n=32, frequency_penalty=0.1,
        presence_penalty=0.1, dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
        dry_penalty_last_n=-1, dry_sequence_breakers=["\n", "."], xtc_probability=0.3,
        xtc_threshold=0.2, dynatemp_range=0.3, dynatemp_exponent=1.2, min_keep=1,
        logit_bias={13: -2.0}, samplers=["top_k", "penalties", "dry", "typical_p", "top_p",
                                         "min_p", "xtc", "temperature"],
        reuse_cache=False,
    )
    text = ctx.generate(PROMPT, **settings)
    assert "".join(ctx.stream(PROMPT, **settings)) == text


@pytest.mark.parametrize("mode", [1, 2])
def test_mirostat_is_repeatable_with_a_seed(ctx: powerinfer.Context, mode: int) -> None:
    a = ctx.generate(PROMPT, max_tokens=20, temperature=1.0, seed=3, mirostat_mode=mode,
                     mirostat_tau=4.0, mirostat_eta=0.2, reuse_cache=False)
    b = ctx.generate(PROMPT, max_tokens=20, temperature=1.0, seed=3, mirostat_mode=mode,
                     mirostat_tau=4.0, mirostat_eta=0.2, reuse_cache=False)
    assert a == b and ctx.last_result is not None and ctx.last_result.n_generated_tokens > 0


def test_a_sampler_object_drives_generation_and_is_busy_meanwhile(
    model: powerinfer.Model, ctx: powerinfer.Context
) -> None:
    s = powerinfer.Sampler.create_for_model(model, temperature=0)
    greedy = ctx.generate(PROMPT, max_tokens=10, temperature=0, reuse_cache=False)
    assert ctx.generate(PROMPT, max_tokens=10, sampler=s, reuse_cache=False) == greedy
    # More tokens than a stream runs ahead of its reader: the worker, and so the sampler, is
    # still busy when the sampler is used below (10 could all be made by then).
    with ctx.stream(PROMPT, max_tokens=64, sampler=s, reuse_cache=False) as stream:
        with pytest.raises(powerinfer.InvalidArgumentError, match="in use"):
            s.sample(np.zeros(model.n_vocab, dtype=np.float32))
        list(stream)
    assert isinstance(s.sample(peaked(model.n_vocab, [5])), int)


def test_token_events_carry_ids_logprobs_and_alternatives(ctx: powerinfer.Context) -> None:
    events: list[powerinfer.TokenEvent] = []
    text = ctx.generate(PROMPT, max_tokens=12, temperature=0, on_token=events.append, n_probs=5)
    assert ctx.last_result is not None
    assert len(events) == ctx.last_result.n_generated_tokens
    for e in events:
        assert e.logprob <= 0.0
        assert len(e.top_logprobs) == 5
        probs = [p for _, p in e.top_logprobs]
        assert probs == sorted(probs, reverse=True)
        # Greedy: the token is the most probable alternative.
        assert e.top_logprobs[0][0] == e.token
        assert math.isclose(e.top_logprobs[0][1], e.logprob, rel_tol=1e-5, abs_tol=1e-6)
    assert "".join(e.text for e in events) == text


def test_on_token_returning_false_stops_the_generation(ctx: powerinfer.Context) -> None:
    seen: list[int] = []

    def stop_after_three(e: powerinfer.TokenEvent) -> bool:
        seen.append(e.token)
        return len(seen) < 3

    ctx.generate(PROMPT, max_tokens=30, temperature=0, on_token=stop_after_three)
    assert len(seen) == 3


def test_stream_tokens_yields_events_and_collects_the_text(ctx: powerinfer.Context) -> None:
    whole = ctx.generate(PROMPT, max_tokens=15, temperature=0, reuse_cache=False)
    with ctx.stream_tokens(PROMPT, max_tokens=15, temperature=0, reuse_cache=False,
                           n_probs=2) as stream:
        events = list(stream)
    assert events and all(len(e.top_logprobs) == 2 for e in events)
    assert stream.text == whole


def test_generation_arguments_are_checked(ctx: powerinfer.Context) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="n_probs"):
        ctx.generate(PROMPT, max_tokens=2, n_probs=65)
    with pytest.raises(powerinfer.InvalidArgumentError, match="seq_id"):
        ctx.generate(PROMPT, max_tokens=2, seq_id=-1)
    with pytest.raises(TypeError):
        ctx.generate(PROMPT, max_tokens=2, sampler="greedy")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ctx.generate(PROMPT, max_tokens=2, logit_bias=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(powerinfer.InvalidArgumentError, match=r"(?i)line"):
        ctx.generate(PROMPT, max_tokens=2, grammar="root ::= (")


def test_seeded_draws_follow_the_softmax(model: powerinfer.Model) -> None:
    logits = np.full(model.n_vocab, -np.inf, dtype=np.float32)
    logits[[10, 20, 30]] = [0.0, 1.0, 2.0]
    target = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    s = powerinfer.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=21)
    n = 6000
    draws = np.array([s.sample(logits) for _ in range(n)])
    counts = np.array([(draws == t).sum() for t in (10, 20, 30)])
    assert counts.sum() == n
    # Five standard deviations of a binomial count.
    assert np.all(np.abs(counts - n * target) < 5 * np.sqrt(n * target * (1 - target)))


def test_the_samplers_list_chooses_the_stages(model: powerinfer.Model) -> None:
    rng = np.random.default_rng(4)
    rows = [rng.normal(size=model.n_vocab).astype(np.float32) for _ in range(20)]
    only_top_k = powerinfer.Sampler(temperature=1.0, top_k=1, seed=6, samplers=["top_k"])
    assert [only_top_k.sample(r) for r in rows] == [int(np.argmax(r)) for r in rows]
    no_top_k = powerinfer.Sampler(temperature=1.0, top_k=1, seed=6, samplers=["temperature"])
    assert [no_top_k.sample(r) for r in rows] != [int(np.argmax(r)) for r in rows]
