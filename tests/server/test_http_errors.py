"""Every error path of pi-server through plain curl, and the small routes: each answer has its
status and an OpenAI-style JSON error naming the field; nothing crashes; a client that goes away
frees its slot; SIGTERM drains the requests in flight."""
import json
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import wait_until
from http_client import request, stream

CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(CURL is None, reason="curl is not installed")


def curl(server, path, body=None, *extra, method=None, key=None):
    """(status, parsed body) of `curl -s` against the server."""
    cmd = [CURL, "-s", "-m", "120", "-w", "\n%{http_code}", server.base_url + path]
    if method:
        cmd += ["-X", method]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary",
                body if isinstance(body, str) else json.dumps(body)]
    if key:
        cmd += ["-H", "Authorization: Bearer " + key]
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=150, check=True).stdout
    text, _, code = out.rpartition("\n")
    try:
        return int(code), json.loads(text)
    except ValueError:
        return int(code), text


def assert_error(answer, status, error_type, param=None, code=None):
    got_status, body = answer
    assert got_status == status, body
    error = body["error"]
    assert error["type"] == error_type and error["message"]
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code


CHAT = "/v1/chat/completions"
HELLO = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}


def test_malformed_json(server):
    status, body = curl(server, CHAT, '{"messages": [')
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert "JSON" in body["error"]["message"]


@pytest.mark.parametrize("body, param", [
    ({"max_tokens": 4}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 5}]},
     "messages[1].content"),
    (dict(HELLO, temperature=3), "temperature"),
    (dict(HELLO, temperature="hot"), "temperature"),
    (dict(HELLO, top_p=0), "top_p"),
    (dict(HELLO, max_tokens=-2), "max_tokens"),
    (dict(HELLO, max_tokens="many"), "max_tokens"),
    (dict(HELLO, presence_penalty=9), "presence_penalty"),
    (dict(HELLO, stop=[1, 2]), "stop[0]"),
    (dict(HELLO, seed="x"), "seed"),
    (dict(HELLO, logit_bias={"not-a-token": 1}), "logit_bias.not-a-token"),
    (dict(HELLO, response_format={"type": "yaml"}), "response_format.type"),
    (dict(HELLO, n=2), "n"),
    (dict(HELLO, stream="yes"), "stream"),
    (dict(HELLO, grammar="root ::= ("), "grammar"),
])
def test_bad_field_names_it(server, body, param):
    assert_error(curl(server, CHAT, body), 400, "invalid_request_error", param)


def test_bad_completion_prompt(server):
    assert_error(curl(server, "/v1/completions", {"prompt": {"text": 1}}), 400,
                 "invalid_request_error", "prompt")


def test_unknown_route_and_wrong_method(server):
    assert_error(curl(server, "/v1/nothing"), 404, "not_found_error")
    assert_error(curl(server, "/v1/models", method="DELETE"), 405, "invalid_request_error")
    assert_error(curl(server, CHAT), 405, "invalid_request_error")  # GET


def test_embeddings_are_404(server):
    status, body = curl(server, "/v1/embeddings", {"input": "x", "model": "m"})
    assert status == 404 and "embeddings" in body["error"]["message"]


def test_body_too_large(start_server):
    s = start_server("--max-body-bytes", "1000", slots=1, ctx=512)
    big = {"prompt": "a " * 2000, "max_tokens": 1}
    assert_error(curl(s, "/v1/completions", big), 413, "invalid_request_error",
                 code="request_too_large")
    assert curl(s, "/v1/completions", {"prompt": "In the", "max_tokens": 1})[0] == 200


def test_prompt_too_long(start_server):
    s = start_server(slots=2, ctx=256)  # 128 positions a slot
    status, body = curl(s, "/v1/completions", {"prompt": "and he said " * 100, "max_tokens": 1})
    assert status == 413 and body["error"]["code"] == "context_length_exceeded"
    assert body["error"]["param"] == "prompt"
    limited = start_server("--max-prompt-tokens", "8", slots=1, ctx=512)
    assert curl(limited, "/v1/completions", {"prompt": "and he said " * 5})[1]["error"][
        "code"] == "context_length_exceeded"


def test_api_key_required(api_key_server):
    s = api_key_server
    assert_error(curl(s, "/v1/models"), 401, "authentication_error", code="invalid_api_key")
    assert_error(curl(s, "/v1/models", key="wrong"), 401, "authentication_error")
    assert curl(s, "/v1/models", key=s.api_key)[0] == 200
    assert curl(s, "/v1/models", None, "-H", "X-Api-Key: " + s.api_key)[0] == 200
    # The page and the health check need no key.
    assert curl(s, "/health")[0] == 200
    assert curl(s, "/")[0] == 200


def long_request(server, max_tokens=100000):
    """curl streaming a long generation in the background."""
    body = json.dumps({"prompt": "And it came to pass", "max_tokens": max_tokens,
                       "ignore_eos": True, "stream": True})
    return subprocess.Popen([CURL, "-sN", "-m", "300", server.base_url + "/v1/completions",
                             "-H", "Content-Type: application/json", "-d", body],
                            stdout=subprocess.PIPE, text=True)


def test_queue_full_is_429(start_server):
    s = start_server("--max-queue", "1", slots=1, ctx=4096)
    # The running request ends when its slot's 4096 cells are full, a few seconds on the tiny
    # model; on a loaded machine that can come before the third request, which then queues
    # behind the second. Such a try says nothing, so it is made again.
    for _ in range(3):
        running = long_request(s)
        running.stdout.readline()  # the first chunk: the slot is taken
        queued = long_request(s)
        wait_until(lambda: request(s, "GET", "/metrics")[1].count("powerinfer_queue_length 1") == 1,
                   30, "the second request to be queued")
        status, body = curl(s, "/v1/completions", {"prompt": "x", "max_tokens": 1})
        slot_still_taken = running.poll() is None and queued.poll() is None
        for p in (running, queued):
            p.kill()
            p.wait()
        if status == 429 or slot_still_taken:
            break
    assert status == 429 and body["error"]["code"] == "queue_full"


def test_disconnect_frees_the_slot(start_server):
    s = start_server(slots=1, ctx=4096)
    client = long_request(s)
    assert client.stdout.readline().startswith("data: ")
    client.kill()
    client.wait()
    start = time.monotonic()
    status, body = curl(s, "/v1/completions", {"prompt": "In the", "max_tokens": 4})
    assert status == 200 and body["choices"][0]["text"] is not None
    assert time.monotonic() - start < 20
    metrics = request(s, "GET", "/metrics")[1]
    assert int(re.search(r"^powerinfer_requests_cancelled_total (\d+)", metrics, re.M)
               .group(1)) >= 1


def test_sigterm_drains_the_requests_in_flight(start_server):
    s = start_server(slots=1, ctx=2048)
    result = {}

    def run():
        result["stream"] = stream(s, "/v1/completions",
                                  {"prompt": "And God said", "max_tokens": 1500,
                                   "ignore_eos": True})

    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: "slots_processing\":1" in json.dumps(request(s, "GET", "/health")[1])
               .replace(" ", ""), 30, "the stream to start")
    s.proc.send_signal(signal.SIGTERM)
    assert t.is_alive(), "the stream ended before the signal: make it longer"
    wait_until(lambda: any("draining" in line for line in s.log), 10, "the drain to start")
    try:
        status, _ = curl(s, "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert status == 503
    except subprocess.CalledProcessError as e:
        assert e.returncode == 7  # the listener closed: connection refused
    t.join(300)
    status, events, done = result["stream"]
    assert status == 200 and done
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert s.proc.wait(60) == 0


def test_tokenize_and_detokenize(server):
    status, body = curl(server, "/tokenize", {"content": "In the beginning"})
    assert status == 200 and all(isinstance(t, int) for t in body["tokens"])
    tokens = body["tokens"]
    status, back = curl(server, "/detokenize", {"tokens": tokens})
    assert status == 200 and back["content"].strip() == "In the beginning"
    pieces = curl(server, "/tokenize", {"content": "In the beginning", "with_pieces": True})[1]
    assert [p["id"] for p in pieces["tokens"]] == tokens
    with_bos = curl(server, "/tokenize", {"content": "In", "add_special": True})[1]["tokens"]
    assert len(with_bos) == 2
    assert_error(curl(server, "/tokenize", {"content": 5}), 400, "invalid_request_error",
                 "content")
    assert_error(curl(server, "/detokenize", {"tokens": [-1]}), 400, "invalid_request_error",
                 "tokens[0]")


def test_health(server):
    status, body = curl(server, "/health")
    assert status == 200 and body["status"] == "ok"
    assert body["slots_idle"] + body["slots_processing"] == 4


METRICS = {
    "powerinfer_requests_total": "counter",
    "powerinfer_prompt_tokens_total": "counter",
    "powerinfer_generated_tokens_total": "counter",
    "powerinfer_prompt_seconds_total": "counter",
    "powerinfer_decode_seconds_total": "counter",
    "powerinfer_requests_cancelled_total": "counter",
    "powerinfer_decode_tokens_per_second": "gauge",
    "powerinfer_queue_length": "gauge",
    "powerinfer_slots_busy": "gauge",
    "powerinfer_slots_total": "gauge",
    "powerinfer_requests_in_flight": "gauge",
    "powerinfer_ffn_active_fraction": "gauge",
}
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*"'
                    r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*)?\})? (\S+)$')


def parse_prometheus(text):
    """{name: (type, [(labels, value)])} of Prometheus text format 0.0.4; asserts its form."""
    types, samples = {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, "not a Prometheus sample: %r" % line
        samples.setdefault(match.group(1), []).append((match.group(3) or "",
                                                       float(match.group(5))))
    return {name: (types.get(name), values) for name, values in samples.items()}


def test_metrics(server):
    curl(server, "/v1/completions", {"prompt": "In the", "max_tokens": 4})
    status, text = curl(server, "/metrics")
    assert status == 200
    metrics = parse_prometheus(text)
    for name, kind in METRICS.items():
        assert name in metrics and metrics[name][0] == kind, name
    assert metrics["powerinfer_slots_total"][1][0][1] == 4
    assert metrics["powerinfer_generated_tokens_total"][1][0][1] >= 4
    assert 0 < metrics["powerinfer_ffn_active_fraction"][1][0][1] <= 1
    labels = [labels for labels, _ in metrics["powerinfer_requests_total"][1]]
    assert any('route="/v1/completions"' in l and 'code="200"' in l for l in labels)
