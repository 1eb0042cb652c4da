"""Context: the KV cache and run state of one conversation; generation and evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional, Sequence, Union

from . import _powerinfer
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    from ._model import Model

__all__ = ["Context", "Stream", "GenerationResult", "ContextStats", "FfnTrace"]

# Pieces a stream's worker may run ahead of the reader.
_STREAM_AHEAD = 16


@dataclass(frozen=True)
class GenerationResult:
    """How a generation went."""

    n_prompt_tokens: int
    n_generated_tokens: int
    prompt_seconds: float
    decode_seconds: float
    stop_reason: str
    """``"eos"``, ``"max_tokens"``, ``"stop_string"``, ``"cancelled"`` or ``"context_full"``."""


@dataclass(frozen=True)
class ContextStats:
    """Counters since the context was created or :meth:`Context.reset_stats` was called."""

    n_prompt_tokens: int
    """Tokens of multi-token batches."""
    n_decode_tokens: int
    """Tokens of single-token batches."""
    prompt_seconds: float
    decode_seconds: float
    ffn_active_fraction: float
    """Average fraction of FFN neurons computed per layer and token."""
    decode_bytes: int
    """Bytes of weights and KV cache read by single-token batches."""


@dataclass(frozen=True)
class FfnTrace:
    """What every layer's FFN saw for a token sequence (:meth:`Context.trace_ffn`)."""

    inputs: numpy.typing.NDArray[numpy.float32]
    """``[n_layer, n_tokens, n_embd]``: the residual stream before ``ffn_norm``, which the
    predictor reads."""
    active: numpy.typing.NDArray[numpy.bool_]
    """``[n_layer, n_tokens, n_ff]``: the FFN activation is non-zero. On a model that computes
    every neuron (a dense file, or ``Model(..., dense=True)``) these are the truly active
    neurons; in sparse inference only the neurons the predictor selected can be active."""
    activations: Optional[numpy.typing.NDArray[numpy.float32]] = None
    """``[n_layer, n_tokens, n_ff]``: the activations themselves, when asked for."""


def _token_array(tokens: Sequence[int], n_vocab: int) -> numpy.typing.NDArray[numpy.int32]:
    import numpy  # noqa: F811 (only trace_ffn needs it at run time)

    ids = numpy.asarray(tokens)
    if ids.size == 0:
        raise InvalidArgumentError("trace_ffn() needs at least one token", -1)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"tokens must be a 1-D sequence of integer ids, not {ids.dtype} of shape {ids.shape}",
            -1,
        )
    bad = numpy.flatnonzero((ids < 0) | (ids >= n_vocab))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"token {i} has id {int(ids[i])}, outside the vocabulary [0, {n_vocab})", -1
        )
    return numpy.ascontiguousarray(ids, dtype=numpy.int32)


def _seed(seed: Optional[int]) -> Optional[int]:
    if seed is None:
        return None
    if not 0 <= seed < _powerinfer.SEED_RANDOM:
        raise InvalidArgumentError(f"seed must be in [0, 2**32 - 1), not {seed}", -1)
    return seed


def _stop_list(stop: Union[str, Sequence[str], None]) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    return list(stop)


class Stream(Iterator[str]):
    """The text of a running generation, piece by piece (each piece is complete UTF-8).

    Made by :meth:`Context.stream`; the generation runs on a worker thread at most a few pieces
    ahead of the reader. The context is busy until the stream is exhausted, closed, cancelled or
    garbage-collected. Use it in a ``for`` loop or a ``with`` block.
    """

    def __init__(self, context: Context, impl: _powerinfer._Generation) -> None:
        self._context = context
        self._impl = impl

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> str:
        piece = self._impl.next_piece()
        if piece is None:
            self._context.last_result = self.result
            raise StopIteration
        return piece

    @property
    def result(self) -> Optional[GenerationResult]:
        """The statistics once the generation has finished, else ``None``."""
        r = self._impl.result
        return None if r is None else GenerationResult(**r)

    def cancel(self) -> None:
        """Asks the generation to stop; the pieces already made can still be read."""
        self._impl.cancel()

    def close(self) -> None:
        """Stops the generation and waits for its worker (idempotent)."""
        self._impl.close()
        if self.result is not None:
            self._context.last_result = self.result

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Context:
    """The KV cache, scratch memory and statistics of one conversation on a :class:`Model`.

    Made by :meth:`Model.create_context` (same arguments). A context keeps its model alive. Use
    it from one thread at a time: a call while another call or an unfinished :class:`Stream` is
    using it raises :class:`InvalidArgumentError`. :meth:`cancel` is the one method that may be
    called from any thread at any time.

    Generation and evaluation release the GIL and run on a worker thread, so that Ctrl-C
    (KeyboardInterrupt) cancels them; the interrupt propagates once the library has stopped.
    """

    last_result: Optional[GenerationResult]
    """The result of the last finished generate() or stream(), or ``None``."""

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 512,
        seed: Optional[int] = None,
        n_threads: Optional[int] = None,
        n_batch: int = 512,
        kv_f16: bool = True,
    ) -> None:
        if n_threads is not None and n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, not {n_threads}", -1)
        checked = _seed(seed)
        self.model = model
        self.last_result = None
        self._impl = _powerinfer._Context(
            model._impl,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_threads=n_threads,
            seed=_powerinfer.SEED_RANDOM if checked is None else checked,
            kv_f16=kv_f16,
        )

    @property
    def n_ctx(self) -> int:
        """KV cache size in tokens."""
        return self._impl.n_ctx

    @property
    def n_past(self) -> int:
        """Cached positions: where the next :meth:`eval` continues."""
        return self._impl.n_past

    @property
    def closed(self) -> bool:
        return self._impl.closed

    def generate(
        self,
        prompt: str,
        max_tokens: int = 128,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        stop: Union[str, Sequence[str], None] = None,
        seed: Optional[int] = None,
        *,
        add_bos: bool = True,
    ) -> str:
        """Completes ``prompt`` and returns the generated text (without the prompt).

        Clears the context first. Sampling: top-k (``<= 0``: off), then top-p (1: off), then
        temperature (``<= 0``: greedy); ``seed`` (``None``: the context's seed) makes it
        repeatable. Generation stops at EOS, ``max_tokens``, a ``stop`` string (not included in
        the text), a full context, or :meth:`cancel` (the text so far is returned; see
        :attr:`last_result`). Ctrl-C cancels it and raises KeyboardInterrupt.

        Raises:
            ContextFullError: the prompt does not fit in ``n_ctx``.
            InvalidArgumentError: a bad argument, or the context is busy.
        """
        impl = self._start(prompt, max_tokens, temperature, top_k, top_p, stop, seed, add_bos, 0)
        try:
            text = impl.collect()
        finally:
            impl.close()
        r = impl.result
        self.last_result = None if r is None else GenerationResult(**r)
        return text

    def stream(
        self,
        prompt: str,
        max_tokens: int = 128,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        stop: Union[str, Sequence[str], None] = None,
        seed: Optional[int] = None,
        *,
        add_bos: bool = True,
    ) -> Stream:
        """Like :meth:`generate`, but yields the text as it is made, in complete UTF-8 pieces.

        The generation starts at once (argument errors raise here); errors of the run raise
        from the iteration. ``"".join(ctx.stream(...))`` equals ``ctx.generate(...)`` with the
        same arguments and seed.
        """
        impl = self._start(
            prompt, max_tokens, temperature, top_k, top_p, stop, seed, add_bos, _STREAM_AHEAD
        )
        return Stream(self, impl)

    def _start(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float,
        top_k: int,
        top_p: float,
        stop: Union[str, Sequence[str], None],
        seed: Optional[int],
        add_bos: bool,
        capacity: int,
    ) -> _powerinfer._Generation:
        return self._impl.start(
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            stop=_stop_list(stop),
            seed=_seed(seed),
            add_bos=add_bos,
            capacity=capacity,
        )

    def eval(self, tokens: Sequence[int]) -> numpy.typing.NDArray[numpy.float32]:
        """Runs the model on ``tokens`` at the positions after the cached ones (``pi_decode``,
        in ``n_batch`` chunks) and returns :meth:`logits`.

        Raises:
            InvalidArgumentError: an empty list or an id outside the vocabulary.
            ContextFullError: the tokens do not fit in ``n_ctx``.
            CancelledError: :meth:`cancel` stopped it (:attr:`n_past` tells what is cached).
        """
        self._impl.eval(list(tokens))
        return self._impl.logits()

    def trace_ffn(self, tokens: Sequence[int], *, activations: bool = False) -> FfnTrace:
        """Runs ``tokens`` from position 0 and returns what every layer's FFN saw: its input
        (what the predictor reads) and which neurons fired (``pi_context_set_ffn_observer``).

        This is how a predictor trainer reads a corpus: clears the cache, decodes in
        ``n_batch`` chunks with the GIL released and fills preallocated arrays (no per-layer
        Python calls). Afterwards the cache holds ``tokens`` and :meth:`logits` is unset.
        ``activations=True`` also keeps the float activations (``4 * n_ff`` bytes per layer and
        token). For true activation masks load the model with ``dense=True``.

        Raises:
            InvalidArgumentError: no tokens, or an id outside the vocabulary.
            ContextFullError: more tokens than ``n_ctx``.
            UnsupportedError: some FFN neurons of the model run on an offload device.
            CancelledError: :meth:`cancel` stopped it.
        """
        ids = _token_array(tokens, self.model.n_vocab)
        inputs, active, values = self._impl.trace_ffn(ids, with_activations=activations)
        return FfnTrace(inputs=inputs, active=active, activations=values)

    def logits(self) -> numpy.typing.NDArray[numpy.float32]:
        """The last :meth:`eval`'s logits for its last token: a read-only float32 NumPy view of
        ``n_vocab`` values.

        The view stays valid memory for its whole life, but its values are those of the latest
        eval(): the next eval() overwrites them (``.copy()`` to keep them). generate(),
        stream() and truncate() invalidate the logits: calling logits() before the next eval()
        raises :class:`InvalidArgumentError`.
        """
        return self._impl.logits()

    def truncate(self, pos: int = 0) -> None:
        """Forgets the cached positions ``>= pos`` (0: everything)."""
        self._impl.truncate(pos)

    def reset(self) -> None:
        """Forgets every cached position."""
        self._impl.truncate(0)

    def cancel(self) -> None:
        """Stops the running generate(), stream() or eval() at the next layer boundary. Safe
        from any thread; a request made while nothing runs is dropped by the next call."""
        self._impl.cancel()

    def stats(self) -> ContextStats:
        """Token counts, times and the FFN fraction computed since creation or reset_stats()."""
        return ContextStats(**self._impl.stats())

    def reset_stats(self) -> None:
        self._impl.reset_stats()

    def close(self) -> None:
        """Releases the context now (idempotent); a running generation is cancelled first."""
        self._impl.close()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"n_ctx={self.n_ctx}"
        return f"<powerinfer.Context ({state})>"
