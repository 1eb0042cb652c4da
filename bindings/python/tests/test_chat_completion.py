"""Chat templates, special tokens and the llama-cpp-python-shaped completions."""

from __future__ import annotations

import json

import pytest

import powerinfer

HELLO = [{"role": "user", "content": "Hello"}]


def test_chatml_renders_exactly(model: powerinfer.Model) -> None:
    messages = [{"role": "system", "content": "Be brief."}, *HELLO]
    assert model.apply_chat_template(messages, template="chatml") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert model.apply_chat_template(HELLO, "chatml", add_assistant=False) == (
        "<|im_start|>user\nHello<|im_end|>\n")
    assert model.chat_template_name("chatml") == "chatml"


def test_an_unknown_template_is_unsupported_and_named(model: powerinfer.Model) -> None:
    with pytest.raises(powerinfer.UnsupportedError, match="no-such-template"):
        model.apply_chat_template(HELLO, template="no-such-template")


def test_a_template_that_is_not_recognised_needs_chat_format(ctx: powerinfer.Context) -> None:
    # The fixture vocabulary's own template is none of the known formats.
    with pytest.raises(powerinfer.UnsupportedError, match="chat template"):
        ctx.create_chat_completion(HELLO, max_tokens=1)
    with pytest.raises(powerinfer.UnsupportedError, match="chat template"):
        ctx.model.chat_template_name()


def test_bad_messages_are_refused(model: powerinfer.Model) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="role"):
        model.apply_chat_template([{"content": "Hi"}], "chatml")
    with pytest.raises(TypeError):
        model.apply_chat_template("Hello", "chatml")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        model.apply_chat_template([("user", "Hi")], "chatml")  # type: ignore[list-item]
    with pytest.raises(powerinfer.InvalidArgumentError, match="NUL"):
        model.apply_chat_template([{"role": "user", "content": "a\0b"}], "chatml")


def test_special_tokens_parse_only_when_asked(model: powerinfer.Model) -> None:
    bos, eos = model.info.bos, model.info.eos
    assert model.tokenize("</s>", add_bos=False, special=True) == [eos]
    assert model.tokenize("<s>Hi", add_bos=False, special=True)[0] == bos
    assert eos not in model.tokenize("</s>", add_bos=False)
    assert model.token_is_eog(eos)
    assert not model.token_is_eog(300)
    with pytest.raises(powerinfer.InvalidArgumentError):
        model.token_is_eog(model.n_vocab)
    assert model.token_eot == model.info.eot


def test_a_chat_completion_has_llama_cpp_pythons_shape(ctx: powerinfer.Context) -> None:
    out = ctx.create_chat_completion(messages=HELLO, max_tokens=8, temperature=0,
                                     chat_format="chatml")
    assert out["object"] == "chat.completion"
    assert out["id"].startswith("chatcmpl-") and isinstance(out["created"], int)
    assert out["model"] == ctx.model.path
    (choice,) = out["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    assert choice["logprobs"] is None
    usage = out["usage"]
    assert usage["completion_tokens"] == ctx.last_result.n_generated_tokens <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_max_tokens_finishes_with_length(ctx: powerinfer.Context) -> None:
    out = ctx.create_chat_completion(HELLO, max_tokens=2, temperature=0, chat_format="chatml",
                                     logit_bias={ctx.model.info.eos: float("-inf")})
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 2


def test_streamed_chunks_add_up_to_the_completion(model: powerinfer.Model) -> None:
    kwargs = dict(max_tokens=12, temperature=0, chat_format="chatml")
    with model.create_context() as a, model.create_context() as b:
        whole = a.create_chat_completion(HELLO, **kwargs)
        chunks = list(b.create_chat_completion(HELLO, stream=True, **kwargs))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_the_next_turn_decodes_only_its_new_tokens(ctx: powerinfer.Context) -> None:
    kwargs = dict(max_tokens=6, temperature=0, chat_format="chatml")
    conversation = [{"role": "system", "content": "You answer in verse."}, *HELLO]
    first = ctx.create_chat_completion(conversation, **kwargs)
    first_prompt = first["usage"]["prompt_tokens"]
    conversation += [first["choices"][0]["message"],
                     {"role": "user", "content": "Tell me more."}]
    ctx.reset_stats()
    second = ctx.create_chat_completion(conversation, **kwargs)
    result = ctx.last_result
    assert result is not None
    assert result.n_cached_tokens >= first_prompt
    decoded = ctx.stats().n_prompt_tokens + ctx.stats().n_decode_tokens
    new_prompt = second["usage"]["prompt_tokens"] - result.n_cached_tokens
    assert decoded <= new_prompt + second["usage"]["completion_tokens"] + 1


def test_a_json_schema_response_parses(ctx: powerinfer.Context) -> None:
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
              "required": ["answer"]}
    out = ctx.create_chat_completion(
        HELLO, max_tokens=64, temperature=0.8, seed=1, chat_format="chatml",
        response_format={"type": "json_object", "schema": schema})
    assert out["choices"][0]["finish_reason"] == "stop"
    assert json.loads(out["choices"][0]["message"]["content"])["answer"] in ("yes", "no")


def test_logprobs_follow_openais_shape(ctx: powerinfer.Context) -> None:
    out = ctx.create_chat_completion(HELLO, max_tokens=5, temperature=0, chat_format="chatml",
                                     logprobs=True, top_logprobs=3)
    entries = out["choices"][0]["logprobs"]["content"]
    assert len(entries) == out["usage"]["completion_tokens"]
    for e in entries:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        assert e["top_logprobs"][0]["token"] == e["token"]
    with pytest.raises(powerinfer.InvalidArgumentError, match="logprobs"):
        ctx.create_chat_completion(HELLO, max_tokens=1, chat_format="chatml", top_logprobs=2)


def test_bad_completion_arguments_are_refused(ctx: powerinfer.Context) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError, match="response_format"):
        ctx.create_chat_completion(HELLO, chat_format="chatml", response_format={"type": "xml"})
    with pytest.raises(powerinfer.InvalidArgumentError, match="parse_special"):
        ctx.create_chat_completion(HELLO, chat_format="chatml", parse_special=False)
    with pytest.raises(TypeError):
        ctx.create_chat_completion(HELLO, chat_format="chatml", no_such_argument=1)


def test_a_text_completion_has_llama_cpp_pythons_shape(ctx: powerinfer.Context) -> None:
    out = ctx.create_completion("Once upon a time", max_tokens=6, temperature=0, logprobs=2)
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    (choice,) = out["choices"]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == out["usage"]["completion_tokens"]
    assert all(len(top) <= 2 for top in lp["top_logprobs"])
    chunks = list(ctx.create_completion("Once upon a time", max_tokens=6, temperature=0,
                                        stream=True, reuse_cache=False))
    assert "".join(c["choices"][0]["text"] for c in chunks) == choice["text"]


def test_a_ten_turn_chat_reuses_every_earlier_turn(model: powerinfer.Model) -> None:
    ctx = model.create_context(n_ctx=1024)
    conversation = [{"role": "system", "content": "You are terse."}]
    previous_prompt = 0
    for turn in range(10):
        conversation.append({"role": "user", "content": f"Question number {turn}?"})
        out = ctx.create_chat_completion(conversation, max_tokens=4, temperature=0,
                                         chat_format="chatml")
        result = ctx.last_result
        assert result is not None and result.n_cached_tokens >= previous_prompt
        if turn > 0:
            # The new turn: the last answer's end, the question and the assistant's opening
            # (the fixture vocabulary spells ChatML's markers as text).
            assert result.n_prompt_tokens - result.n_cached_tokens < 60
        previous_prompt = out["usage"]["prompt_tokens"]
        conversation.append(out["choices"][0]["message"])


def test_streamed_logprobs_come_with_their_pieces(ctx: powerinfer.Context) -> None:
    chunks = list(ctx.create_chat_completion(HELLO, max_tokens=6, temperature=0, stream=True,
                                             chat_format="chatml", logprobs=True,
                                             top_logprobs=1))
    entries = [e for c in chunks[1:-1] for e in c["choices"][0]["logprobs"]["content"]]
    assert len(entries) == ctx.last_result.n_generated_tokens
    assert all(e["top_logprobs"][0]["token"] == e["token"] for e in entries)
