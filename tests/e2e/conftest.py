import os
import socket
import subprocess
import sys
import time

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server():
    """`prove serve banking shopping --transport http` in a subprocess, with a bearer token."""
    port, token = free_port(), "s3cret-token"
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROVE_TOKEN": token}
    proc = subprocess.Popen(
        [sys.executable, "-m", "prove_core.cli", "serve", "banking", "shopping", "--transport", "http", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()) from None
            time.sleep(0.1)
    yield {"url": f"http://127.0.0.1:{port}/mcp", "token": token, "port": port}
    proc.terminate()
    proc.wait(timeout=10)


SERVE_CMD = [sys.executable, "-m", "prove_core.cli", "serve"]
