"""Fixtures that run the real pi-server on loopback for the tests of this folder.

PI_SERVER names the binary (CTest sets it); without it the tests skip, and under CI=true they
fail. PI_SERVER_MODEL names the model (default: the repository's trained fixture)."""
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO / "tests" / "data" / "relu-llama-kjv.q4_0.powerinfer.gguf"
LISTENING = re.compile(r"pi-server: listening on (http://[^\s:]+:(\d+))")
START_SECONDS = 60
STOP_SECONDS = 60


def server_binary():
    path = os.environ.get("PI_SERVER")
    if not path or not os.path.isfile(path):
        message = "PI_SERVER does not name the pi-server binary (CTest's server_http sets it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


class Server:
    """One pi-server process: started with `flags`, stopped with SIGTERM (exit status 0)."""

    def __init__(self, *flags, api_key=None, slots=4, ctx=2048):
        self.api_key = api_key
        model = os.environ.get("PI_SERVER_MODEL", str(DEFAULT_MODEL))
        cmd = [server_binary(), "-m", model, "--port", "0", "-np", str(slots), "-c", str(ctx),
               "-t", "2", *flags]
        if api_key:
            cmd += ["--api-key", api_key]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log = []
        found = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.log.append(line)
                match = LISTENING.search(line)
                if match and not found.is_set():
                    self.base_url = match.group(1)
                    self.port = int(match.group(2))
                    found.set()

        self.reader = threading.Thread(target=read_stderr, daemon=True)
        self.reader.start()
        if not found.wait(START_SECONDS):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("pi-server did not start: " + " ".join(cmd) + "\n" +
                               "".join(self.log))
        self.host = "127.0.0.1"

    @property
    def headers(self):
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def stop(self):
        """SIGTERM: drains and exits 0. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("pi-server did not exit within %d s of SIGTERM" %
                                     STOP_SECONDS)
        self.reader.join(5)
        return self.proc.returncode

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS for the server")


def stopped_cleanly(server):
    status = server.stop()
    assert status == 0, "pi-server exited with %s:\n%s" % (status, "".join(server.log))


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    stopped_cleanly(s)


@pytest.fixture(scope="module")
def api_key_server():
    s = Server(api_key="test-key-" + str(os.getpid()))
    yield s
    stopped_cleanly(s)


@pytest.fixture
def start_server():
    """start_server(*flags, api_key=None, slots=4, ctx=2048): a server for one test."""
    started = []

    def start(*flags, **options):
        s = Server(*flags, **options)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            stopped_cleanly(s)


def wait_until(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)
