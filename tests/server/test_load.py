"""A bounded load test on loopback: 16 concurrent streaming clients send 200 requests to 4 slots.
Every stream must be complete and well-formed, none may fail, and the server's resident memory
must stay flat (within 5 %) between the first and the last 100 requests."""
import os
import queue
import shutil
import subprocess
import threading
import time

import pytest
from http_client import stream

CLIENTS = 16
REQUESTS = 200
MAX_TOKENS = 32
TIME_LIMIT = 300
# An ASan build keeps freed memory in quarantine, so its RSS says nothing about leaks (its own
# leak check at exit does).
ASAN = bool(os.environ.get("PI_SERVER_ASAN"))


def check_stream(status, events, done, kind):
    """The reasons a stream is not complete and well-formed (empty when it is)."""
    problems = []
    if status != 200:
        return ["status %d: %s" % (status, events)]
    if not done:
        problems.append("no [DONE]")
    finishes = [c["choices"][0]["finish_reason"] for c in events
                if c.get("choices") and c["choices"][0].get("finish_reason")]
    if len(finishes) != 1 or finishes[0] not in ("stop", "length"):
        problems.append("finish reasons %r" % finishes)
    usage = [c["usage"] for c in events if c.get("usage")]
    if len(usage) != 1:
        problems.append("%d usage chunks" % len(usage))
    if any(c.get("object") != kind for c in events):
        problems.append("a chunk is not a " + kind)
    if usage and finishes == ["length"] and usage[0]["completion_tokens"] != MAX_TOKENS:
        problems.append("length after %d tokens" % usage[0]["completion_tokens"])
    return problems


def listen_queue_length(port):
    """The queue length of the socket listening on `port`, as `ss` reports it (its Send-Q)."""
    ss = shutil.which("ss")
    if not ss:
        message = "ss (iproute2) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    out = subprocess.run([ss, "-H", "-l", "-t", "-n", "sport = :%d" % port], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out and out[0] == "LISTEN", out
    return int(out[2])


def test_the_listen_queue_holds_a_burst_of_clients(start_server):
    # httplib's own queue of 5 overflowed under load when 16 clients connected at once: SYN
    # cookies, then a connection reset by peer.
    server = start_server(slots=1, ctx=512)
    assert listen_queue_length(server.port) >= 128


def test_sixteen_clients_two_hundred_requests(start_server):
    server = start_server(slots=4, ctx=4096)
    jobs = queue.Queue()
    for i in range(REQUESTS):
        jobs.put(i)
    failures, texts = [], {}
    lock = threading.Lock()
    rss = {}
    done_count = [0]
    deadline = time.monotonic() + TIME_LIMIT

    def client():
        while time.monotonic() < deadline:
            try:
                i = jobs.get_nowait()
            except queue.Empty:
                return
            chat = i % 2 == 0
            path = "/v1/chat/completions" if chat else "/v1/completions"
            body = {"max_tokens": MAX_TOKENS, "temperature": 0.8, "seed": i,
                    "stream_options": {"include_usage": True}}
            if chat:
                body["messages"] = [{"role": "user", "content": "Tell me of day %d." % i}]
            else:
                body["prompt"] = "And on the %d day" % i
            try:
                status, events, done = stream(server, path, body)
                problems = check_stream(status, events, done,
                                        "chat.completion.chunk" if chat else "text_completion")
                text = "".join((c["choices"][0].get("delta", {}).get("content") or "")
                               if chat else c["choices"][0].get("text", "")
                               for c in events if c.get("choices"))
            except Exception as e:  # counted as a failure of this request, not of the thread
                problems, text = ["%s: %s" % (type(e).__name__, e)], ""
            with lock:
                texts[i] = text
                if problems:
                    failures.append((i, problems))
                done_count[0] += 1
                if done_count[0] == REQUESTS // 2:
                    rss["first"] = server.rss_kib()
                if done_count[0] == REQUESTS:
                    rss["last"] = server.rss_kib()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIME_LIMIT + 30)
    seconds = time.monotonic() - start

    assert done_count[0] == REQUESTS, "%d of %d requests in %.0f s" % (done_count[0], REQUESTS,
                                                                       seconds)
    assert not failures, failures[:5]
    assert sum(1 for t in texts.values() if t) > REQUESTS * 0.9
    print("\n%d requests from %d clients in %.1f s; server RSS %d KiB after the first %d, "
          "%d KiB after the last %d" % (REQUESTS, CLIENTS, seconds, rss["first"], REQUESTS // 2,
                                        rss["last"], REQUESTS // 2))
    if not ASAN:
        assert abs(rss["last"] - rss["first"]) <= 0.05 * rss["first"], rss
