"""A running generation: its options, its text and token events, and how it went."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from . import _powerinfer
from ._errors import InvalidArgumentError
from ._sampling import LLAMA_CPP_DEFAULTS, Sampler, chain_fields, chain_settings, seed_value

if TYPE_CHECKING:
    from ._context import Context

__all__ = ["GenerationResult", "TokenEvent", "Stream", "TokenStream"]

# Alternatives a token event may carry (pi_generate_params.n_probs).
MAX_PROBS = 64
# Pieces a stream's worker may run ahead of the reader.
STREAM_AHEAD = 16


@dataclass(frozen=True)
class GenerationResult:
    """How a generation went."""

    n_prompt_tokens: int
    """Tokens of the prompt, the cached ones included."""
    n_generated_tokens: int
    prompt_seconds: float
    decode_seconds: float
    stop_reason: str
    """``"eos"``, ``"max_tokens"``, ``"stop_string"``, ``"cancelled"`` or ``"context_full"``."""
    n_cached_tokens: int = 0
    """Prompt tokens the cache already held (``reuse_cache``): not decoded again."""
    n_context_shifts: int = 0
    """Times a full context was shifted (``context_shift=True``)."""


@dataclass(frozen=True)
class TokenEvent:
    """One generated token (``pi_token_event``)."""

    token: int
    logprob: float
    """The log-probability the model gave the token (log-softmax of its logits, before
    sampling)."""
    text: str
    """The complete UTF-8 text this token releases; may be empty while bytes of a character or
    of a possible stop string wait."""
    top_logprobs: tuple[tuple[int, float], ...] = ()
    """The ``n_probs`` most probable tokens and their log-probabilities, most probable first."""


def token_event(item: tuple[int, float, str, list[tuple[int, float]]]) -> TokenEvent:
    """A TokenEvent from the extension's tuple (_Generation.next_item)."""
    token, logprob, text, top = item
    return TokenEvent(token, logprob, text, tuple((int(t), float(p)) for t, p in top))


def _stop_list(stop: Union[str, Sequence[str], None]) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    return list(stop)


def _flag_int(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be in [{low}, {high}], not {value}", -1)
    return value


def generation_options(
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
    n_probs: int = 0,
) -> dict[str, Any]:
    """The keyword arguments of ``_Context.start`` (but prompt and capacity) for the arguments
    of :meth:`Context.generate`."""
    # First, while the locals are the arguments.
    settings = chain_settings(locals())
    fields = chain_fields(
        settings, logit_bias=logit_bias, grammar=grammar, json_schema=json_schema,
        samplers=samplers, dry_sequence_breakers=dry_sequence_breakers,
    )
    if sampler is not None and not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a powerinfer.Sampler, not {type(sampler).__name__}")
    return dict(
        max_tokens=_flag_int("max_tokens", max_tokens, 0, 2**31 - 1),
        temperature=fields["temperature"],
        top_k=fields["top_k"],
        top_p=fields["top_p"],
        stop=_stop_list(stop),
        seed=seed_value(seed),
        add_bos=bool(add_bos),
        chain=fields,
        sampler=None if sampler is None else sampler._impl,
        reuse_cache=bool(reuse_cache),
        context_shift=bool(context_shift),
        n_keep=_flag_int("n_keep", n_keep, 0, 2**31 - 1),
        seq_id=_flag_int("seq_id", seq_id, 0, _powerinfer.MAX_SEQUENCES - 1),
        parse_special=bool(parse_special),
        n_probs=_flag_int("n_probs", n_probs, 0, MAX_PROBS),
    )


_OPTIONS = inspect.signature(generation_options)


def options_of(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`generation_options` for the arguments of a call with its parameters (e.g.
    :meth:`Context.generate`'s locals), so that the caller does not list them again."""
    return generation_options(**{name: arguments[name] for name in _OPTIONS.parameters})


def chat_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    """llama-cpp-python's defaults (min_p 0.05, ...) for the chain settings not given."""
    # penalty_last_n's default is already llama.cpp's, and giving it would clash with
    # repeat_last_n.
    out = {
        k: v
        for k, v in LLAMA_CPP_DEFAULTS.items()
        if k in _OPTIONS.parameters and k != "penalty_last_n"
    }
    out.update(kwargs)
    return out


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
            self._finished()
            raise StopIteration
        return piece

    def _finished(self) -> None:
        self._context.last_result = self.result

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
            self._finished()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TokenStream(Iterator[TokenEvent]):
    """The tokens of a running generation as :class:`TokenEvent` objects (id, log-probability,
    alternatives, released text); :attr:`text` is the text streamed so far. Made by
    :meth:`Context.stream_tokens`; otherwise a :class:`Stream`."""

    def __init__(self, context: Context, impl: _powerinfer._Generation) -> None:
        self._stream = Stream(context, impl)
        self._impl = impl
        self.text = ""
        """The generated text read so far (what :meth:`Context.generate` would return once the
        stream is exhausted)."""

    def __iter__(self) -> TokenStream:
        return self

    def __next__(self) -> TokenEvent:
        while True:
            item = self._impl.next_item()
            if item is None:
                self._stream._finished()
                raise StopIteration
            if isinstance(item, str):
                self.text += item
            else:
                return token_event(item)

    @property
    def result(self) -> Optional[GenerationResult]:
        return self._stream.result

    def cancel(self) -> None:
        self._stream.cancel()

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> TokenStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def collect(
    impl: _powerinfer._Generation, on_token: Optional[Callable[[TokenEvent], Optional[bool]]]
) -> str:
    """Every remaining piece of text, joined; ``on_token`` sees each token's event in order and
    stops the generation by returning ``False``."""
    try:
        if on_token is None:
            return impl.collect()
        pieces = []
        while True:
            item = impl.next_item()
            if item is None:
                break
            if isinstance(item, str):
                pieces.append(item)
            elif on_token(token_event(item)) is False:
                impl.cancel()
                break
        return "".join(pieces)
    finally:
        impl.close()
