"""Small stdlib HTTP helpers for the server tests: JSON requests and server-sent event streams."""
import http.client
import json


def request(server, method, path, body=None, headers=None, timeout=120):
    """(status, parsed JSON or text) of one request."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, data, headers if headers is not None else server.headers)
        resp = conn.getresponse()
        raw = resp.read().decode()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw
    finally:
        conn.close()


def stream(server, path, body, timeout=120):
    """(status, [parsed data events], saw_done) of one streaming request; checks the SSE form."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(dict(body, stream=True)), server.headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [json.loads(resp.read())], False
        assert resp.getheader("Content-Type", "").startswith("text/event-stream")
        events, done = [], False
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if not line:
                continue
            assert line.startswith("data: "), "not an SSE data line: %r" % line
            assert not done, "data after [DONE]"
            if line == "data: [DONE]":
                done = True
                continue
            events.append(json.loads(line[len("data: "):]))
        return resp.status, events, done
    finally:
        conn.close()
