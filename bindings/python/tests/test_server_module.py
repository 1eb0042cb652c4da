"""python -m powerinfer.server runs the installed pi-server with the same flags."""
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

SERVER = os.environ.get("PI_SERVER")
pytestmark = pytest.mark.skipif(not SERVER and os.environ.get("CI") != "true",
                                reason="PI_SERVER does not name pi-server")


def test_help_is_pi_servers():
    out = subprocess.run([sys.executable, "-m", "powerinfer.server", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: pi-server")


def test_serves_a_model(model_path):
    proc = subprocess.Popen([sys.executable, "-m", "powerinfer.server", "-m",
                             str(model_path), "--port", "0", "-c", "512", "-t", "2"],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                url = match.group(1)
                break
        assert url, "the server did not start"
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            assert json.load(r)["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_missing_server_is_a_clear_error(tmp_path):
    env = dict(os.environ, PI_SERVER=str(tmp_path / "no-such-pi-server"))
    out = subprocess.run([sys.executable, "-m", "powerinfer.server", "--help"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "PI_SERVER" in out.stderr
