#!/usr/bin/env python3
"""pi-server throughput and latency with real HTTP clients (bench/README.md, "pi-server").

Starts pi-server on loopback with -np slots and measures, in one run:
  - decode tokens/s of one streaming client alone, and the aggregate of -np clients streaming
    together (ratio = aggregate / one);
  - time to first token of a short prompt on an idle server, and while -np - 1 other clients
    stream (ratio = loaded / idle).
Only the standard library; hand-run, not part of the test suite.

  python3 bench/server_bench.py --server build/tools/pi-server/pi-server -m MODEL -t 2 -np 4
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time

LISTEN = re.compile(r"listening on http://([^:]+):(\d+)")


def start_server(args):
    cmd = [args.server, "-m", args.model, "--port", "0", "-np", str(args.parallel), "-t",
           str(args.threads), "-c", str(args.ctx_per_slot * args.parallel)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("pi-server exited before listening: " + " ".join(cmd))
        match = LISTEN.search(line)
        if match:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, match.group(1), int(match.group(2))
    proc.kill()
    raise SystemExit("pi-server did not start listening within 300 s")


class Stream:
    """One streaming /v1/completions request, timed on the client."""

    def __init__(self, host, port, prompt, max_tokens):
        self.host, self.port = host, port
        self.body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True},
                                "temperature": 0, "ignore_eos": True})
        self.first = None
        self.done = None
        self.tokens = 0
        self.stop_early = threading.Event()
        self.error = None

    def run(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            self.started = time.monotonic()
            conn.request("POST", "/v1/completions", self.body,
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                self.error = f"HTTP {resp.status}: {resp.read()[:200]!r}"
                return
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    self.tokens = chunk["usage"]["completion_tokens"]
                if self.first is None and any(c.get("text") for c in chunk.get("choices", [])):
                    self.first = time.monotonic()
                if self.stop_early.is_set():
                    break
            self.done = time.monotonic()
        except Exception as e:  # reported, not raised: the bench names what failed
            self.error = repr(e)
        finally:
            conn.close()


def run_streams(streams):
    threads = [threading.Thread(target=s.run) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in streams:
        if s.error:
            raise SystemExit("a request failed: " + s.error)


def decode_rate(host, port, n_clients, n_tokens):
    streams = [Stream(host, port, f"Story number {i}: once upon a time", n_tokens)
               for i in range(n_clients)]
    run_streams(streams)
    start = min(s.first for s in streams)
    end = max(s.done for s in streams)
    return sum(s.tokens for s in streams) / (end - start)


def first_token_seconds(host, port):
    s = Stream(host, port, "Hello", 1)
    s.run()
    if s.error:
        raise SystemExit("a request failed: " + s.error)
    return (s.first or s.done) - s.started


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True, help="the pi-server binary")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-np", "--parallel", type=int, default=4)
    p.add_argument("-n", "--n-tokens", type=int, default=64, help="tokens per decode request")
    p.add_argument("-r", "--repetitions", type=int, default=3)
    p.add_argument("--ctx-per-slot", type=int, default=1024)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = p.parse_args()

    proc, host, port = start_server(args)
    try:
        first_token_seconds(host, port)  # warm-up: page in the weights
        one = [decode_rate(host, port, 1, args.n_tokens) for _ in range(args.repetitions)]
        many = [decode_rate(host, port, args.parallel, args.n_tokens)
                for _ in range(args.repetitions)]
        idle = [first_token_seconds(host, port) for _ in range(args.repetitions * 3)]
        background = [Stream(host, port, f"Background story {i}:", args.ctx_per_slot - 16)
                      for i in range(args.parallel - 1)]
        threads = [threading.Thread(target=s.run) for s in background]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while any(s.first is None for s in background) and time.monotonic() < deadline:
            time.sleep(0.05)
        loaded = [first_token_seconds(host, port) for _ in range(args.repetitions * 3)]
        still_streaming = all(s.done is None for s in background)
        for s in background:
            s.stop_early.set()
        for t in threads:
            t.join()
    finally:
        proc.terminate()
        proc.wait(timeout=120)

    result = {
        "model": args.model, "threads": args.threads, "slots": args.parallel,
        "n_tokens": args.n_tokens, "repetitions": args.repetitions,
        "one_slot_tokens_per_second": statistics.median(one),
        "all_slots_tokens_per_second": statistics.median(many),
        "ttft_idle_seconds": statistics.median(idle),
        "ttft_loaded_seconds": statistics.median(loaded),
        "background_streamed_throughout": still_streaming,
    }
    result["aggregate_ratio"] = (result["all_slots_tokens_per_second"] /
                                 result["one_slot_tokens_per_second"])
    result["ttft_ratio"] = result["ttft_loaded_seconds"] / result["ttft_idle_seconds"]
    if args.json:
        json.dump(result, sys.stdout)
        print()
        return
    print(f"model {args.model}, -t {args.threads}, {args.parallel} slots, "
          f"{args.n_tokens} tokens per request, median of {args.repetitions}")
    print(f"decode, 1 client:          {result['one_slot_tokens_per_second']:8.1f} t/s")
    print(f"decode, {args.parallel} clients (sum):  "
          f"{result['all_slots_tokens_per_second']:8.1f} t/s   "
          f"ratio {result['aggregate_ratio']:.2f}x")
    print(f"first token, idle:         {result['ttft_idle_seconds'] * 1000:8.1f} ms")
    print(f"first token, {args.parallel - 1} streaming: "
          f"{result['ttft_loaded_seconds'] * 1000:8.1f} ms   "
          f"ratio {result['ttft_ratio']:.2f}x"
          + ("" if still_streaming else "  (a background stream ended early)"))


if __name__ == "__main__":
    main()
