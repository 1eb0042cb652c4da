"""The sampler chain: :class:`Sampler`, and the settings that generation shares with it.

The chain (``docs/sampling.md``) runs logit bias, the grammar, the reorderable stages (by
default penalties, DRY, top-k, typical, top-p, min-p, XTC, temperature: llama.cpp's order) and
then the pick: greedy when ``temperature <= 0``, mirostat when ``mirostat_mode != 0``, else a
seeded draw.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

from . import _powerinfer
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    from ._model import Model

__all__ = ["Sampler", "SAMPLER_STAGES", "LLAMA_CPP_DEFAULTS"]

SAMPLER_STAGES: dict[str, int] = {
    "penalties": 0,
    "dry": 1,
    "top_k": 2,
    "typical_p": 3,
    "top_p": 4,
    "min_p": 5,
    "xtc": 6,
    "temperature": 7,
}
"""The names ``samplers=[...]`` takes, with their ``pi_sampler_stage`` values."""
_STAGE_ALIASES = {"typical": "typical_p", "penalty": "penalties", "temp": "temperature"}

LLAMA_CPP_DEFAULTS: dict[str, Any] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.95,
    "min_p": 0.05,
    "typical_p": 1.0,
    "dynatemp_range": 0.0,
    "dynatemp_exponent": 1.0,
    "penalty_last_n": 64,
    "repeat_penalty": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "dry_multiplier": 0.0,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_penalty_last_n": -1,
    "xtc_probability": 0.0,
    "xtc_threshold": 0.1,
    "mirostat_mode": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "min_keep": 0,
}
"""The chain's defaults (llama.cpp's, as ``pi_sampler_default_params`` and llama-cpp-python have
them): what :class:`Sampler` and ``create_chat_completion`` use for an unset argument."""

_FLOATS = (
    "temperature", "top_p", "min_p", "typical_p", "dynatemp_range", "dynatemp_exponent",
    "repeat_penalty", "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base",
    "xtc_probability", "xtc_threshold", "mirostat_tau", "mirostat_eta",
)
_INTS = ("top_k", "penalty_last_n", "dry_allowed_length", "dry_penalty_last_n", "mirostat_mode",
         "min_keep")

Logits = Union["numpy.typing.NDArray[numpy.float32]", Sequence[float]]


def _number(name: str, value: object, kind: type) -> Union[int, float]:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if kind is int:
        if not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        n = int(value)
        if not -(2**31) <= n < 2**31:
            raise InvalidArgumentError(f"{name} = {n} is out of the int32 range", -1)
        return n
    x = float(value)
    if math.isnan(x):
        raise InvalidArgumentError(f"{name} is NaN", -1)
    return x


def seed_value(seed: Optional[int]) -> Optional[int]:
    """A checked seed; ``None`` stays ``None`` (the caller's default)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
    if not 0 <= seed < _powerinfer.SEED_RANDOM:
        raise InvalidArgumentError(f"seed must be in [0, 2**32 - 1), not {seed}", -1)
    return seed


def _stages(samplers: Sequence[str]) -> list[int]:
    if isinstance(samplers, str):
        raise TypeError("samplers must be a list of stage names, not a str")
    out = []
    for name in samplers:
        key = _STAGE_ALIASES.get(name, name)
        if key not in SAMPLER_STAGES:
            raise InvalidArgumentError(
                f"unknown sampler {name!r}; the stages are {', '.join(SAMPLER_STAGES)}", -1
            )
        out.append(SAMPLER_STAGES[key])
    return out


def _logit_bias(bias: Mapping[Union[int, str], float]) -> list[tuple[int, float]]:
    if not isinstance(bias, Mapping):
        raise TypeError(f"logit_bias must be a dict {{token: bias}}, not {type(bias).__name__}")
    out = []
    for token, value in bias.items():
        # OpenAI's JSON gives the token ids as strings.
        tid = int(token) if isinstance(token, str) and token.lstrip("-").isdigit() else token
        if isinstance(tid, bool) or not isinstance(tid, int):
            raise TypeError(f"logit_bias keys must be token ids, not {token!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"the bias of token {tid} must be a number, not {value!r}")
        out.append((tid, float(value)))
    return out


def chain_settings(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The numeric chain settings (:data:`LLAMA_CPP_DEFAULTS`' names) among a call's arguments,
    ``penalty_last_n`` and its alias ``repeat_last_n`` made one: what :func:`chain_fields`
    takes. The callers keep explicit keyword signatures for their users; a test holds their
    names and defaults to this table."""
    settings = {name: arguments[name] for name in LLAMA_CPP_DEFAULTS}
    settings["penalty_last_n"] = last_n(arguments["penalty_last_n"], arguments["repeat_last_n"])
    return settings


def json_schema_text(schema: Union[str, Mapping[str, Any], None]) -> Optional[str]:
    """A JSON schema as the library takes it: text."""
    if schema is None or isinstance(schema, str):
        return schema
    if isinstance(schema, Mapping):
        return json.dumps(schema)
    raise TypeError(f"json_schema must be a dict or a JSON str, not {type(schema).__name__}")


def chain_fields(
    settings: Mapping[str, Any],
    *,
    logit_bias: Optional[Mapping[Union[int, str], float]] = None,
    grammar: Optional[str] = None,
    json_schema: Union[str, Mapping[str, Any], None] = None,
    samplers: Optional[Sequence[str]] = None,
    dry_sequence_breakers: Optional[Sequence[str]] = None,
    seed: Optional[int] = None,
) -> dict[str, Any]:
    """The ``pi_sampler_params`` fields (by their C names) for the extension.

    ``settings`` holds the numeric settings by their Python names (those of
    :data:`LLAMA_CPP_DEFAULTS`); every one of them must be given.
    """
    fields: dict[str, Any] = {}
    for name in _FLOATS:
        fields[name] = _number(name, settings[name], float)
    for name in _INTS:
        fields[name] = _number(name, settings[name], int)
    fields["mirostat"] = fields.pop("mirostat_mode")
    if logit_bias:
        fields["logit_bias"] = _logit_bias(logit_bias)
    if grammar is not None:
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be GBNF text (str), not {type(grammar).__name__}")
        fields["grammar"] = grammar
    schema = json_schema_text(json_schema)
    if schema is not None:
        fields["json_schema"] = schema
    if samplers is not None:
        fields["stages"] = _stages(samplers)
    if dry_sequence_breakers is not None:
        if isinstance(dry_sequence_breakers, str):
            raise TypeError("dry_sequence_breakers must be a list of str, not a str")
        fields["dry_sequence_breakers"] = [str(b) for b in dry_sequence_breakers]
    checked = seed_value(seed)
    if checked is not None:
        fields["seed"] = checked
    return fields


class Sampler:
    """A sampler chain (``pi_sampler``): turns logits into tokens, keeping its history.

    Every argument defaults to llama.cpp's value (:data:`LLAMA_CPP_DEFAULTS`). ``model`` gives
    the vocabulary a grammar, a JSON schema, DRY's sequence breakers and a logit bias need
    (:meth:`create_for_model`); without one they raise :class:`InvalidArgumentError`.

    Args:
        temperature: ``<= 0``: greedy. ``dynatemp_range`` > 0 moves it within
            ``temperature +- dynatemp_range`` by the entropy (``dynatemp_exponent``).
        top_k, top_p, min_p, typical_p: the truncating stages (``top_k <= 0``, ``top_p = 1``,
            ``min_p = 0``, ``typical_p = 1``: off); ``min_keep`` tokens always stay.
        repeat_penalty, frequency_penalty, presence_penalty: penalties over the last
            ``penalty_last_n`` accepted tokens (``repeat_last_n`` is the same; -1: all).
        dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n,
            dry_sequence_breakers: DRY (0 multiplier: off; breakers ``None``: ``"\\n"``,
            ``":"``, ``'"'``, ``"*"``).
        xtc_probability, xtc_threshold: XTC (0 probability: off).
        mirostat_mode, mirostat_tau, mirostat_eta: mirostat v1 (1) or v2 (2) instead of the
            draw.
        logit_bias: ``{token: bias}`` added to the logits; ``-math.inf`` forbids a token.
        grammar: a GBNF grammar (``docs/grammar.md``) the output must follow; a malformed one
            raises :class:`InvalidArgumentError` naming its line and column.
        json_schema: a JSON schema (dict or text) compiled to a grammar.
        samplers: the order of the stages, by name (:data:`SAMPLER_STAGES`).
        seed: the draw's seed (``None``: from the clock).
    """

    def __init__(
        self,
        model: Optional[Model] = None,
        *,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        dynatemp_range: float = 0.0,
        dynatemp_exponent: float = 1.0,
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
        min_keep: int = 0,
        logit_bias: Optional[Mapping[Union[int, str], float]] = None,
        grammar: Optional[str] = None,
        json_schema: Union[str, Mapping[str, Any], None] = None,
        samplers: Optional[Sequence[str]] = None,
        seed: Optional[int] = None,
    ) -> None:
        # First, while the locals are the arguments.
        settings = chain_settings(locals())
        fields = chain_fields(
            settings, logit_bias=logit_bias, grammar=grammar, json_schema=json_schema,
            samplers=samplers, dry_sequence_breakers=dry_sequence_breakers, seed=seed,
        )
        from ._model import Model

        if model is not None and not isinstance(model, Model):
            raise TypeError(f"model must be a powerinfer.Model or None, not {type(model).__name__}")
        self.model = model
        self._impl = _powerinfer._Sampler(None if model is None else model._impl, fields)

    @classmethod
    def create_for_model(cls, model: Model, **settings: Any) -> Sampler:
        """A chain for ``model``'s vocabulary (``pi_sampler_create_for_model``); the keyword
        arguments are those of :class:`Sampler`."""
        return cls(model, **settings)

    @property
    def closed(self) -> bool:
        return self._impl.closed

    def sample(self, logits: Logits) -> int:
        """Runs the chain over one token's logits (``n_vocab`` values, e.g.
        :meth:`Context.logits`), picks a token and accepts it: the penalties' history, the
        grammar and mirostat advance."""
        return self._impl.sample(logits)

    def accept(self, token: int) -> None:
        """Records a token the sampler did not pick (e.g. of the prompt) in the history the
        penalties and DRY look at; the grammar does not advance."""
        self._impl.accept(token)

    def reset(self) -> None:
        """Forgets the history, restarts the grammar and mirostat, and reseeds the draw."""
        self._impl.reset()

    def save_state(self) -> bytes:
        """The mutable state (history, grammar position, mirostat, RNG) as bytes."""
        return self._impl.save_state()

    def load_state(self, data: bytes) -> None:
        """Restores :meth:`save_state`'s bytes. Bytes of a differently configured sampler or
        truncated ones raise :class:`FormatError` naming the reason; the sampler is then
        untouched."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load_state() needs bytes, not {type(data).__name__}")
        self._impl.load_state(bytes(data))

    def close(self) -> None:
        """Releases the chain now (idempotent)."""
        self._impl.close()

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<powerinfer.Sampler ({'closed' if self.closed else 'open'})>"


def last_n(penalty_last_n: Optional[int], repeat_last_n: Optional[int]) -> int:
    """``penalty_last_n`` and its llama.cpp alias ``repeat_last_n``: one may be given."""
    if penalty_last_n is not None and repeat_last_n is not None and penalty_last_n != repeat_last_n:
        raise InvalidArgumentError(
            "penalty_last_n and repeat_last_n are the same setting: give one", -1
        )
    given = penalty_last_n if penalty_last_n is not None else repeat_last_n
    return LLAMA_CPP_DEFAULTS["penalty_last_n"] if given is None else given
