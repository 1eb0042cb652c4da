"""Context: the KV cache and run state of one conversation (or several sequences);
generation, evaluation, cache edits and saved state."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, Union

from . import _chat, _powerinfer
from ._errors import InvalidArgumentError
from ._generation import (
    STREAM_AHEAD,
    GenerationResult,
    Stream,
    TokenEvent,
    TokenStream,
    collect,
    generation_options,
    options_of,
)
from ._sampling import Sampler, seed_value

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    from ._model import Model, StrPath

__all__ = ["Context", "ContextStats", "FfnTrace"]


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


def _sampler_impl(sampler: Optional[Sampler]) -> Optional[_powerinfer._Sampler]:
    if sampler is None:
        return None
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a powerinfer.Sampler, not {type(sampler).__name__}")
    return sampler._impl


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
    """The result of the last finished generate(), stream() or chat completion, or ``None``."""

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 512,
        seed: Optional[int] = None,
        n_threads: Optional[int] = None,
        n_batch: int = 512,
        kv_f16: bool = True,
        n_seq_max: int = 1,
    ) -> None:
        if n_threads is not None and n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, not {n_threads}", -1)
        if isinstance(n_seq_max, bool) or not isinstance(n_seq_max, int):
            raise TypeError(f"n_seq_max must be an int, not {type(n_seq_max).__name__}")
        if not 1 <= n_seq_max <= _powerinfer.MAX_SEQUENCES:
            raise InvalidArgumentError(
                f"n_seq_max must be in [1, {_powerinfer.MAX_SEQUENCES}], not {n_seq_max}", -1
            )
        checked = seed_value(seed)
        self.model = model
        self.last_result = None
        self._impl = _powerinfer._Context(
            model._impl,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_threads=n_threads,
            seed=_powerinfer.SEED_RANDOM if checked is None else checked,
            kv_f16=kv_f16,
            n_seq_max=n_seq_max,
        )

    @property
    def n_ctx(self) -> int:
        """KV cache size in tokens (cells shared by all sequences)."""
        return self._impl.n_ctx

    @property
    def n_past(self) -> int:
        """Sequence 0's next position: where the next :meth:`eval` continues."""
        return self._impl.n_past

    @property
    def n_seq_max(self) -> int:
        """Sequences the cache holds at once: ids ``0 .. n_seq_max - 1``."""
        return self._impl.n_seq_max

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
        min_p: float = 0.0,
        typical_p: float = 1.0,
        repeat_penalty: float = 1.0,
        penalty_last_n: Optional[int] = None,
        repeat_last_n: Optional[int] = None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        dry_multiplier: float = 0.0,
        dry_base: float = 1.75,
        dry_allowed_length: int = 2,
        dry_penalty_last_n: int = -1,
        dry_sequence_breakers: Optional[Sequence[str]] = None,
        xtc_probability: float = 0.0,
        xtc_threshold: float = 0.1,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        dynatemp_range: float = 0.0,
        dynatemp_exponent: float = 1.0,
        min_keep: int = 0,
        logit_bias: Optional[dict[Union[int, str], float]] = None,
        grammar: Optional[str] = None,
        json_schema: Union[str, dict[str, Any], None] = None,
        samplers: Optional[Sequence[str]] = None,
        sampler: Optional[Sampler] = None,
        reuse_cache: bool = True,
        context_shift: bool = False,
        n_keep: int = 1,
        seq_id: int = 0,
        parse_special: bool = False,
        on_token: Optional[Callable[[TokenEvent], Optional[bool]]] = None,
        n_probs: int = 0,
    ) -> str:
        """Completes ``prompt`` and returns the generated text (without the prompt).

        The cache: with ``reuse_cache`` (default) the cached tokens of sequence ``seq_id`` that
        the prompt starts with are kept and only the rest is decoded (a chat sends the whole
        transcript each turn and pays for the new tokens only; see
        :attr:`GenerationResult.n_cached_tokens`); ``reuse_cache=False`` clears the sequence
        first. The generated tokens stay in the cache. ``context_shift=True`` makes a full
        context keep its first ``n_keep`` tokens, drop half of the rest and go on, instead of
        stopping. ``parse_special=True`` reads control-token text in the prompt (``"<s>"``,
        ``"<|im_start|>"``) as that token.

        Sampling (``docs/sampling.md``): the defaults are 0.1's top-k, top-p and temperature
        (``temperature <= 0``: greedy); the other arguments turn on the rest of the chain, with
        llama-cpp-python's names (see :class:`Sampler`): ``min_p``, ``typical_p``, penalties
        over the last ``penalty_last_n`` (``repeat_last_n``) tokens, DRY, XTC, mirostat,
        dynamic temperature, ``logit_bias={token: bias}``, a GBNF ``grammar``, a
        ``json_schema`` (dict or str) and the stage order ``samplers``. ``sampler`` (a
        :class:`Sampler`) replaces all of them and keeps its history across calls. ``seed``
        (``None``: the context's seed) makes a draw repeatable.

        ``on_token(event)`` sees each generated token (:class:`TokenEvent`: id, log-probability,
        the ``n_probs`` most probable alternatives) on the calling thread; returning ``False``
        stops the generation.

        Generation stops at an end-of-generation token, ``max_tokens``, a ``stop`` string (not
        included in the text), a full context, or :meth:`cancel` (the text so far is returned;
        see :attr:`last_result`). Ctrl-C cancels it and raises KeyboardInterrupt.

        Raises:
            ContextFullError: the prompt does not fit in ``n_ctx``.
            InvalidArgumentError: a bad argument (a malformed grammar names its line and
                column; a sequence id outside ``[0, n_seq_max)``), or the context is busy.
        """
        # First, while the locals are the arguments.
        options = options_of(locals())
        if on_token is not None and not callable(on_token):
            raise TypeError("on_token must be callable")
        impl = self._start(prompt, options, capacity=0, token_events=on_token is not None)
        text = collect(impl, on_token)
        r = impl.result
        self.last_result = None if r is None else GenerationResult(**r)
        return text

    def stream(self, prompt: str, *args: Any, **kwargs: Any) -> Stream:
        """Like :meth:`generate` (the same arguments but ``on_token``), but yields the text as
        it is made, in complete UTF-8 pieces.

        The generation starts at once (argument errors raise here); errors of the run raise
        from the iteration. ``"".join(ctx.stream(...))`` equals ``ctx.generate(...)`` with the
        same arguments and seed.
        """
        options = generation_options(*args, **kwargs)
        return Stream(self, self._start(prompt, options, STREAM_AHEAD, token_events=False))

    def stream_tokens(self, prompt: str, *args: Any, **kwargs: Any) -> TokenStream:
        """Like :meth:`stream`, but yields a :class:`TokenEvent` per generated token (its id,
        log-probability, released text and, with ``n_probs=N``, the N most probable
        alternatives); the stream's ``text`` collects the text."""
        options = generation_options(*args, **kwargs)
        return TokenStream(self, self._start(prompt, options, STREAM_AHEAD, token_events=True))

    def _start(
        self, prompt: str, options: dict[str, Any], capacity: int, *, token_events: bool
    ) -> _powerinfer._Generation:
        if not isinstance(prompt, str):
            raise TypeError(f"the prompt must be a str, not {type(prompt).__name__}")
        return self._impl.start(prompt, capacity=capacity, token_events=token_events, **options)

    def create_chat_completion(
        self, messages: Sequence[dict[str, Any]], **kwargs: Any
    ) -> Union[dict[str, Any], Iterator[dict[str, Any]]]:
        """An OpenAI-style chat completion, the dict llama-cpp-python's ``Llama`` returns.

        ``messages`` (``[{"role": "system" | "user" | "assistant", "content": str}]``) are
        rendered with the model's chat template (``chat_format="chatml"`` etc. names another,
        see :meth:`Model.apply_chat_template`) and generated from with special tokens parsed.
        The cache is kept between calls: send the whole conversation each turn and only its
        new tokens are decoded (:attr:`last_result` ``.n_cached_tokens``).

        Keyword arguments: ``max_tokens`` (``None``: until the end of the turn or a full
        context), ``temperature`` (0.2), ``top_p`` (0.95), ``top_k`` (40), ``min_p`` (0.05),
        ``stop``, ``seed``, ``stream``, ``response_format`` (``{"type": "json_object",
        "schema": {...}}``, the output then follows the schema; ``{"type": "json_object"}``: any
        object; ``{"type": "json_schema", "json_schema": {"schema": {...}}}``), ``logprobs``
        and ``top_logprobs`` (OpenAI's), ``chat_format``, and every sampling and cache argument
        of :meth:`generate` (``repeat_penalty``, ``grammar``, ``logit_bias``, ``sampler``,
        ``seq_id``, ``context_shift``, ...); the unset chain settings take llama.cpp's defaults.

        Returns ``{"id", "object": "chat.completion", "created", "model", "choices": [{"index",
        "message": {"role": "assistant", "content"}, "logprobs", "finish_reason": "stop" |
        "length"}], "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}``; with
        ``stream=True`` an iterator of ``"chat.completion.chunk"`` dicts whose ``choices[0]
        ["delta"]`` holds the role first, then pieces of the content, and whose last chunk has
        the ``finish_reason``.
        """
        return _chat.create_chat_completion(self, messages, **kwargs)

    def create_completion(
        self, prompt: str, **kwargs: Any
    ) -> Union[dict[str, Any], Iterator[dict[str, Any]]]:
        """An OpenAI-style text completion (``"text_completion"``), as llama-cpp-python returns
        it: ``choices[0]["text"]``, ``finish_reason``, ``usage``; ``logprobs=N`` adds the
        completion-style ``logprobs`` (tokens, text offsets, token log-probabilities, the N
        most probable alternatives). Defaults: ``max_tokens=16``, ``temperature=0.8``,
        ``min_p=0.05``; the other arguments are those of :meth:`create_chat_completion` but
        the chat ones."""
        return _chat.create_completion(self, prompt, **kwargs)

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
        """Forgets the cached positions ``>= pos`` of every sequence (0: everything)."""
        self._impl.truncate(pos)

    def reset(self) -> None:
        """Forgets every cached position."""
        self._impl.truncate(0)

    def decode(
        self,
        tokens: Sequence[int],
        positions: Optional[Sequence[int]] = None,
        seq_ids: Optional[Sequence[int]] = None,
        logits: Optional[Sequence[bool]] = None,
    ) -> numpy.typing.NDArray[numpy.float32]:
        """Runs a batch of tokens of any sequences in one forward pass per ``n_batch`` chunk
        (``pi_context_decode``): token i is at ``positions[i]`` of sequence ``seq_ids[i]`` and
        attends only to its own sequence.

        ``positions`` ``None``: each token follows its sequence's last (cached or batched) one;
        ``seq_ids`` ``None``: all in sequence 0; ``logits`` ``None``: each sequence's last token
        of the batch. Returns a float32 array ``[n_flagged, n_vocab]``: the logits of the
        flagged tokens, one row each, in batch order; the last row also becomes
        :meth:`logits`.

        Raises:
            InvalidArgumentError: lists of different lengths, a sequence id outside
                ``[0, n_seq_max)``, a token id outside the vocabulary.
            ContextFullError: no free cache cell is left, or a position is ``>= n_ctx`` (the
                cache is as before the call).
            CancelledError: :meth:`cancel` stopped it.
        """
        return self._impl.decode(
            list(tokens),
            positions=None if positions is None else list(positions),
            seq_ids=None if seq_ids is None else list(seq_ids),
            logits=None if logits is None else [bool(f) for f in logits],
        )

    def kv_seq_remove(self, seq_id: int = -1, p0: int = 0, p1: int = -1) -> None:
        """Forgets the cached positions ``[p0, p1)`` of sequence ``seq_id`` (-1: of every
        sequence; ``p1 < 0``: to the end)."""
        self._impl.kv_seq_remove(seq_id, p0, p1)

    def kv_seq_copy(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        """Makes sequence ``dst`` share ``src``'s cached positions ``[p0, p1)`` without
        recomputing them (a shared prefix); ``dst``'s own tokens there are forgotten first."""
        self._impl.kv_seq_copy(src, dst, p0, p1)

    def kv_seq_keep(self, seq_id: int) -> None:
        """Forgets every sequence but ``seq_id``."""
        self._impl.kv_seq_keep(seq_id)

    def kv_seq_shift(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        """Adds ``delta`` to the positions ``[p0, p1)`` of ``seq_id`` (re-rotating their cached
        keys); positions that would fall below 0 are forgotten."""
        self._impl.kv_seq_shift(seq_id, p0, p1, delta)

    def kv_seq_pos_min(self, seq_id: int) -> int:
        """The lowest cached position of ``seq_id``; -1 when it is empty."""
        return self._impl.kv_seq_pos_min(seq_id)

    def kv_seq_pos_max(self, seq_id: int) -> int:
        """The highest cached position of ``seq_id``; -1 when it is empty."""
        return self._impl.kv_seq_pos_max(seq_id)

    @property
    def kv_n_used_cells(self) -> int:
        """Cache cells in use (a cell shared by copied sequences counts once)."""
        return self._impl.kv_n_used_cells

    def save_state(self, seq_id: int = -1, sampler: Optional[Sampler] = None) -> bytes:
        """The state of sequence ``seq_id`` (-1: of all): its KV cache, the tokens behind it
        (for cache reuse), the last logits and, with ``sampler``, that sampler's state. Loading
        it into a context of the same model continues bit-identically (``docs/state.md``)."""
        return self._impl.save_state(seq_id, _sampler_impl(sampler))

    def load_state(
        self, data: bytes, seq_id: int = -1, sampler: Optional[Sampler] = None
    ) -> None:
        """Restores :meth:`save_state`'s bytes; a single sequence's state goes into sequence
        ``seq_id``, replacing it. :meth:`logits` become the saved last logits.

        Raises:
            FormatError: bytes of another model, version or KV type, or truncated ones (the
                message names the reason); the context and the sampler are untouched.
            ContextFullError: the state needs more cells or sequences than this context has.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load_state() needs bytes, not {type(data).__name__}")
        self._impl.load_state(bytes(data), seq_id, _sampler_impl(sampler))

    def save_state_file(
        self, path: StrPath, seq_id: int = -1, sampler: Optional[Sampler] = None
    ) -> None:
        """:meth:`save_state` to a file (written to a temporary file and renamed)."""
        self._impl.save_state_file(os.fsencode(os.fspath(path)), seq_id, _sampler_impl(sampler))

    def load_state_file(
        self, path: StrPath, seq_id: int = -1, sampler: Optional[Sampler] = None
    ) -> None:
        """:meth:`load_state` from a file; a missing or unreadable one raises
        :class:`FileError`."""
        self._impl.load_state_file(os.fsencode(os.fspath(path)), seq_id, _sampler_impl(sampler))

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
