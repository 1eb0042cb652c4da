"""OpenAI-style completions in the shape llama-cpp-python returns them: create_chat_completion
(the model's chat template, the cache kept between turns) and create_completion."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional, Sequence, Union

from ._errors import InvalidArgumentError
from ._generation import (
    STREAM_AHEAD,
    GenerationResult,
    TokenEvent,
    token_event,
    chat_defaults,
    generation_options,
)

if TYPE_CHECKING:
    from ._context import Context
    from ._model import Model

__all__ = ["create_chat_completion", "create_completion", "chat_messages"]

_FINISH_REASONS = {
    "eos": "stop",
    "stop_string": "stop",
    "cancelled": "stop",
    "max_tokens": "length",
    "context_full": "length",
}


def _content_text(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # OpenAI's list of content parts: the text parts, joined.
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise InvalidArgumentError(
                    f"message {index}: only text content parts are supported, not {part!r}", -1
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise TypeError(f"message {index}: content must be a str, not {type(content).__name__}")


def chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``[{"role": ..., "content": ...}]`` as (role, content) pairs, checked."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts")
    pairs = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {i} must be a dict, not {type(message).__name__}")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidArgumentError(f"message {i} has no 'role'", -1)
        pairs.append((role, _content_text(message.get("content"), i)))
    return pairs


def _json_schema(response_format: Optional[Mapping[str, Any]]) -> Any:
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise TypeError("response_format must be a dict such as {'type': 'json_object'}")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        # Without a schema: any JSON object.
        return response_format.get("schema") or {"type": "object"}
    if kind == "json_schema":
        inner = response_format.get("json_schema") or {}
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if schema is None:
            raise InvalidArgumentError("response_format json_schema needs json_schema.schema", -1)
        return schema
    raise InvalidArgumentError(
        f"response_format type must be 'text', 'json_object' or 'json_schema', not {kind!r}", -1
    )


def _piece(model: Model, token: int) -> tuple[str, list[int]]:
    raw = model.token_to_piece(token)
    return raw.decode("utf-8", errors="replace"), list(raw)


def _chat_logprob(model: Model, event: TokenEvent) -> dict[str, Any]:
    text, raw = _piece(model, event.token)
    top = []
    for token, logprob in event.top_logprobs:
        t, b = _piece(model, token)
        top.append({"token": t, "logprob": logprob, "bytes": b})
    return {"token": text, "logprob": event.logprob, "bytes": raw, "top_logprobs": top}


def _options(
    ctx: Context,
    max_tokens: Optional[int],
    top_logprobs: int,
    settings: dict[str, Any],
    defaults: Mapping[str, Any],
) -> dict[str, Any]:
    given = dict(defaults)
    given.update(settings)
    # None: until an end-of-generation token or the context is full.
    given["max_tokens"] = ctx.n_ctx if max_tokens is None else max_tokens
    given["n_probs"] = top_logprobs
    return generation_options(**chat_defaults(given))


def _items(ctx: Context, impl: Any) -> Iterator[Union[str, TokenEvent]]:
    """A generation's text pieces and token events in order; sets ctx.last_result at the end."""
    try:
        while True:
            item = impl.next_item()
            if item is None:
                break
            yield item if isinstance(item, str) else token_event(item)
    finally:
        impl.close()
        r = impl.result
        if r is not None:
            ctx.last_result = GenerationResult(**r)


def _usage(result: Optional[GenerationResult]) -> dict[str, int]:
    prompt = result.n_prompt_tokens if result else 0
    completion = result.n_generated_tokens if result else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _finish_reason(result: Optional[GenerationResult]) -> str:
    return _FINISH_REASONS.get(result.stop_reason, "stop") if result else "stop"


def _top_logprobs(logprobs: Optional[bool], top_logprobs: Optional[int]) -> int:
    if top_logprobs is None:
        return 0
    if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int):
        raise TypeError(f"top_logprobs must be an int, not {type(top_logprobs).__name__}")
    if top_logprobs and not logprobs:
        raise InvalidArgumentError("top_logprobs needs logprobs=True", -1)
    return top_logprobs


def create_chat_completion(
    ctx: Context,
    messages: Sequence[Mapping[str, Any]],
    *,
    max_tokens: Optional[int] = None,
    temperature: float = 0.2,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    stream: bool = False,
    stop: Union[str, Sequence[str], None] = None,
    seed: Optional[int] = None,
    response_format: Optional[Mapping[str, Any]] = None,
    logprobs: Optional[bool] = None,
    top_logprobs: Optional[int] = None,
    chat_format: Optional[str] = None,
    **settings: Any,
) -> Union[dict[str, Any], Iterator[dict[str, Any]]]:
    """See :meth:`Context.create_chat_completion`."""
    n_top = _top_logprobs(logprobs, top_logprobs)
    schema = _json_schema(response_format)
    if schema is not None:
        if "json_schema" in settings or "grammar" in settings:
            raise InvalidArgumentError(
                "give response_format or json_schema/grammar, not both", -1
            )
        settings["json_schema"] = schema
    for name in ("parse_special", "add_bos"):
        if name in settings:
            raise InvalidArgumentError(f"create_chat_completion() sets {name} itself", -1)
    model = ctx.model
    prompt = model.apply_chat_template(messages, template=chat_format, add_assistant=True)
    # The rendered text holds its special tokens, BOS included when the template starts with
    # one: then no second BOS is added.
    first = model.tokenize(prompt, add_bos=False, special=True)[:1]
    starts_with_bos = bool(first) and first[0] == model.info.bos
    options = _options(
        ctx, max_tokens, n_top,
        dict(settings, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
             stop=stop, seed=seed),
        {"parse_special": True, "add_bos": not starts_with_bos},
    )
    impl = ctx._start(prompt, options, STREAM_AHEAD if stream else 0, token_events=bool(logprobs))
    meta = {
        "id": f"chatcmpl-{uuid.uuid4()}",
        "created": int(time.time()),
        "model": model.path,
    }
    if stream:
        return _chat_chunks(ctx, impl, meta, bool(logprobs))
    content = []
    entries = []
    for item in _items(ctx, impl):
        if isinstance(item, str):
            content.append(item)
        else:
            entries.append(_chat_logprob(model, item))
    result = ctx.last_result
    return {
        **meta,
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(content)},
                "logprobs": {"content": entries} if logprobs else None,
                "finish_reason": _finish_reason(result),
            }
        ],
        "usage": _usage(result),
    }


def _chat_chunks(
    ctx: Context, impl: Any, meta: dict[str, Any], logprobs: bool
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], entries: Optional[list[Any]], finish: Optional[str]):
        return {
            **meta,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": {"content": entries} if entries is not None else None,
                    "finish_reason": finish,
                }
            ],
        }

    yield chunk({"role": "assistant"}, None, None)
    pending = ""
    for item in _items(ctx, impl):
        if isinstance(item, str):
            if not logprobs:
                yield chunk({"content": item}, None, None)
            else:
                pending += item
        else:
            # A token's event follows its text: the chunk carries both.
            yield chunk({"content": pending}, [_chat_logprob(ctx.model, item)], None)
            pending = ""
    if pending:
        yield chunk({"content": pending}, [] if logprobs else None, None)
    yield chunk({}, None, _finish_reason(ctx.last_result))


def create_completion(
    ctx: Context,
    prompt: str,
    *,
    max_tokens: Optional[int] = 16,
    temperature: float = 0.8,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    stream: bool = False,
    stop: Union[str, Sequence[str], None] = None,
    seed: Optional[int] = None,
    logprobs: Optional[int] = None,
    **settings: Any,
) -> Union[dict[str, Any], Iterator[dict[str, Any]]]:
    """See :meth:`Context.create_completion`."""
    if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)):
        raise TypeError(f"logprobs must be an int (alternatives per token), not {logprobs!r}")
    options = _options(
        ctx, max_tokens, logprobs or 0,
        dict(settings, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
             stop=stop, seed=seed),
        {},
    )
    impl = ctx._start(prompt, options, STREAM_AHEAD if stream else 0, token_events=logprobs is not None)
    meta = {"id": f"cmpl-{uuid.uuid4()}", "created": int(time.time()), "model": ctx.model.path}
    model = ctx.model

    def choice(text: str, events: Optional[list[TokenEvent]], offset: int,
               finish: Optional[str]) -> dict[str, Any]:
        lp = None
        if events is not None:
            tokens = [_piece(model, e.token)[0] for e in events]
            offsets = []
            for t in tokens:
                offsets.append(offset)
                offset += len(t)
            lp = {
                "tokens": tokens,
                "text_offset": offsets,
                "token_logprobs": [e.logprob for e in events],
                "top_logprobs": [
                    {_piece(model, t)[0]: p for t, p in e.top_logprobs} for e in events
                ],
            }
        return {"text": text, "index": 0, "logprobs": lp, "finish_reason": finish}

    def chunks() -> Iterator[dict[str, Any]]:
        offset = len(prompt)
        pending = ""
        for item in _items(ctx, impl):
            if isinstance(item, str):
                if logprobs is None:
                    yield {**meta, "object": "text_completion",
                           "choices": [choice(item, None, offset, None)]}
                else:
                    pending += item
            else:
                yield {**meta, "object": "text_completion",
                       "choices": [choice(pending, [item], offset, None)]}
                offset += len(pending)
                pending = ""
        yield {**meta, "object": "text_completion",
               "choices": [choice(pending, [] if logprobs is not None else None, offset,
                                  _finish_reason(ctx.last_result))]}

    if stream:
        return chunks()
    text = []
    events = []
    for item in _items(ctx, impl):
        if isinstance(item, str):
            text.append(item)
        else:
            events.append(item)
    result = ctx.last_result
    return {
        **meta,
        "object": "text_completion",
        "choices": [choice("".join(text), events if logprobs is not None else None,
                           len(prompt), _finish_reason(result))],
        "usage": _usage(result),
    }
