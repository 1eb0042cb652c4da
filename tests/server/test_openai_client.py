"""pi-server through the official openai package, unchanged: chat, completions, streaming,
JSON-schema and JSON-object output, log-probabilities, stop strings, max_tokens, seeds, models,
API keys and the absent embeddings. The fixture is a small KJV-Bible model: the tests check
shapes, determinism and constraints, not what the text says."""
import json
import os

import pytest

try:
    import openai
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("the openai package is not installed (pip install openai)",
                allow_module_level=True)

MESSAGES = [{"role": "user", "content": "Who made the heaven and the earth?"}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


def test_chat_completion(client):
    r = client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=24,
                                       temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_completion(client):
    r = client.completions.create(model="any", prompt="In the beginning", max_tokens=16,
                                  temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 16


def test_chat_stream_equals_the_whole_reply(client):
    kwargs = dict(model="any", messages=MESSAGES, max_tokens=32, temperature=0)
    whole = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True,
                                                 stream_options={"include_usage": True},
                                                 **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and
                c.choices[0].finish_reason]
    assert len(finishes) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_completion_stream_equals_the_whole_reply(client):
    kwargs = dict(model="any", prompt="And God said", max_tokens=32, temperature=0)
    whole = client.completions.create(**kwargs).choices[0].text
    chunks = list(client.completions.create(stream=True, **kwargs))
    assert "".join(c.choices[0].text for c in chunks) == whole
    assert chunks[-1].choices[0].finish_reason == "length"


def test_json_schema_output_parses_and_satisfies_the_schema(client):
    schema = {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 20},
                             "age": {"type": "integer"}},
              "required": ["name", "age"]}
    r = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Describe a person as JSON."}],
        max_tokens=200, temperature=0.7, seed=3,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": schema}})
    assert r.choices[0].finish_reason == "stop"
    value = json.loads(r.choices[0].message.content)
    assert set(value) == {"name", "age"}
    assert isinstance(value["name"], str) and isinstance(value["age"], int)


def test_json_object_output_is_an_object(client):
    r = client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=200,
                                       temperature=0.7, seed=5,
                                       response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_chat_logprobs(client):
    r = client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=8,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert t.top_logprobs[0].logprob == pytest.approx(t.logprob, abs=1e-6)
        assert [a.logprob for a in t.top_logprobs] == sorted(
            (a.logprob for a in t.top_logprobs), reverse=True)
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or t.bytes
    assert "".join(t.token for t in content) == r.choices[0].message.content


def test_completion_logprobs(client):
    r = client.completions.create(model="any", prompt="In the beginning", max_tokens=6,
                                  temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert all(v <= 0 for v in lp.token_logprobs)
    assert all(len(alternatives) == 2 for alternatives in lp.top_logprobs)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)


def test_stop_string_ends_the_reply_before_it(client):
    kwargs = dict(model="any", prompt="And God said", max_tokens=48, temperature=0)
    free = client.completions.create(**kwargs).choices[0].text
    words = free.split()
    assert len(words) > 4
    stop = " " + words[3]
    r = client.completions.create(stop=[stop], **kwargs)
    assert r.choices[0].finish_reason == "stop"
    assert stop not in r.choices[0].text
    assert free.startswith(r.choices[0].text)


def test_max_tokens_gives_length(client):
    r = client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=3,
                                       temperature=0.8, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_seed_makes_sampling_reproducible(client):
    kwargs = dict(model="any", prompt="And the LORD", max_tokens=24, temperature=0.8)
    a = client.completions.create(seed=42, **kwargs).choices[0].text
    b = client.completions.create(seed=42, **kwargs).choices[0].text
    assert a == b


def test_llama_cpp_extra_fields_are_taken(client):
    r = client.completions.create(model="any", prompt="And the LORD", max_tokens=8,
                                  temperature=0.8, seed=1, presence_penalty=0.5,
                                  frequency_penalty=0.5,
                                  extra_body={"top_k": 20, "min_p": 0.1, "repeat_penalty": 1.1,
                                              "mirostat": 2, "typical_p": 0.9})
    assert r.choices[0].text


def test_models_list(client, server):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "relu-llama-kjv.q4_0.powerinfer"
    assert models[0].owned_by == "powerinfer"


def test_embeddings_are_not_offered(client):
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="any", input="x")


def test_api_key(api_key_server):
    base = api_key_server.base_url + "/v1"
    wrong = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.completions.create(model="any", prompt="x", max_tokens=1)
    right = openai.OpenAI(base_url=base, api_key=api_key_server.api_key, max_retries=0)
    assert right.completions.create(model="any", prompt="In the", max_tokens=2).choices
