"""Cancellation: Context.cancel() from another thread, and Ctrl-C (KeyboardInterrupt)."""

from __future__ import annotations

import _thread
import threading
import time

import pytest

import powerinfer

# Greedy decoding of the tiny model from this prompt runs for LONG tokens without meeting EOS
# (about half a second of decoding): far more work than the interrupts below wait for.
PROMPT = "In the beginning"
LONG = 2000


@pytest.fixture
def big_ctx(model: powerinfer.Model):  # type: ignore[no-untyped-def]
    with model.create_context(n_ctx=2048) as c:
        yield c


def test_cancel_from_another_thread_ends_a_stream(ctx: powerinfer.Context) -> None:
    stream = ctx.stream(PROMPT, max_tokens=400, temperature=0)
    first = next(stream)
    canceller = threading.Thread(target=ctx.cancel)
    canceller.start()
    canceller.join()
    rest = list(stream)
    assert first and len(rest) < 399
    assert stream.result is not None and stream.result.stop_reason == "cancelled"
    assert stream.result.n_generated_tokens < 400


def test_cancel_from_another_thread_ends_generate(big_ctx: powerinfer.Context) -> None:
    timer = threading.Timer(0.05, big_ctx.cancel)
    timer.start()
    text = big_ctx.generate(PROMPT, max_tokens=LONG, temperature=0)
    timer.join()
    result = big_ctx.last_result
    assert result is not None and result.stop_reason == "cancelled"
    assert result.n_generated_tokens < LONG
    assert isinstance(text, str)


def test_cancelled_context_generates_normally_afterwards(
    model: powerinfer.Model, big_ctx: powerinfer.Context
) -> None:
    threading.Timer(0.05, big_ctx.cancel).start()
    big_ctx.generate(PROMPT, max_tokens=LONG, temperature=0)
    with model.create_context() as fresh:
        assert big_ctx.generate(PROMPT, max_tokens=16, temperature=0) == fresh.generate(
            PROMPT, max_tokens=16, temperature=0)


def _interrupt_soon() -> threading.Timer:
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    return timer


def test_ctrl_c_cancels_generate_and_raises_keyboard_interrupt(big_ctx: powerinfer.Context) -> None:
    big_ctx.last_result = None
    start = time.monotonic()
    timer = _interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        big_ctx.generate(PROMPT, max_tokens=LONG, temperature=0)
        time.sleep(30)  # only reached if generation beat the interrupt
    timer.join()
    assert big_ctx.last_result is None, "the interrupt arrived after generate() had returned"
    assert time.monotonic() - start < 10
    assert big_ctx.generate(PROMPT, max_tokens=2, temperature=0) is not None


def test_ctrl_c_while_reading_a_stream_cancels_it(big_ctx: powerinfer.Context) -> None:
    stream = big_ctx.stream(PROMPT, max_tokens=LONG, temperature=0)
    timer = _interrupt_soon()
    pieces = 0
    with pytest.raises(KeyboardInterrupt):
        for _ in stream:
            pieces += 1
        time.sleep(30)  # only reached if generation beat the interrupt
    timer.join()
    assert pieces < LONG
    stream.close()
    assert big_ctx.generate(PROMPT, max_tokens=2, temperature=0) is not None
