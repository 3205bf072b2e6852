"""The LLM labeller and teacher against a real local HTTP server speaking the OpenAI API."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.errors import ProveError
from prove_core.model import Example, from_json, read_jsonl
from prove_core.synth.pipeline import synthesize
from prove_core.synth.validation import replay
from prove_plugins.synth.llm import ChatClient, LLMConfig, LLMLabeller
from prove_servers.banking import server as banking
from tests.synth.conftest import experiment


def source_of(prompt: str) -> str:
    return json.loads(prompt.split("Source tool A:\n", 1)[1].split("\n", 1)[0])["name"]


class FakeModel:
    """Answers by prompt kind; ``mode`` switches in bad behaviour the components must survive."""

    def __init__(self):
        self.requests = []
        self.mode = "good"

    def reply(self, prompt: str) -> str:
        self.requests.append(prompt)
        if prompt.startswith("You label dependencies"):
            source = source_of(prompt)
            if source == "list_accounts":
                if sum(source_of(r) == "list_accounts" for r in self.requests if r.startswith("You label")) == 1:
                    return "Sure! Here are my thoughts, no JSON yet."  # first answer unusable: asked again
                return "```json\n" + json.dumps([
                    {"target": "get_balance", "label": "explicit", "param": "account_id", "evidence": "ids"},
                    {"target": "get_balance_v2", "label": "explicit", "param": "account_id"},  # no such tool
                    {"target": "list_cards", "label": "explicit", "param": "colour"},  # no such argument
                    {"target": "get_statement", "label": "explicit", "param": "month"},  # fails live
                ]) + "\n```"
            return "[]"
        if prompt.startswith("Write one message"):
            values = re.search(r"It must contain these values exactly: (.*)\n", prompt)
            if self.mode == "forgetful" or values is None:
                return "[llm] please do the thing"
            return f"[llm] could you handle this for me: {values.group(1)}"
        return "[llm] All done."


@pytest.fixture()
def fake_model():
    model = FakeModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/chat/completions" and body["model"] == "tiny"
            content = model.reply(body["messages"][-1]["content"])
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield model
    server.shutdown()


def test_llm_labeller_keeps_only_real_verified_edges(fake_model):
    labeller = LLMLabeller(LLMLabeller.Config(llm=LLMConfig(base_url=fake_model.url, model="tiny", max_retries=2)))
    graph = labeller.label(Environment([ServerRuntime(banking)]))
    edges = {(e.source, e.target): e for e in graph.edges}
    assert edges[("list_accounts", "get_balance")].verified is True
    assert edges[("list_accounts", "get_balance")].entity == "account"
    assert ("list_accounts", "get_balance_v2") not in edges and ("list_accounts", "list_cards") not in edges
    assert edges[("list_accounts", "get_statement")].verified is False  # no output value is a month
    assert sum(r.startswith("You label") and source_of(r) == "list_accounts" for r in fake_model.requests) == 2


def test_llm_teacher_writes_text_and_falls_back_when_values_are_missing(tmp_path, fake_model, plugins):
    llm = {"base_url": fake_model.url, "model": "tiny", "max_retries": 1}
    exp = experiment(tmp_path, examples=6, teacher="llm", llm=llm)
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = [from_json(r, Example) for r in read_jsonl(tmp_path / "t" / "synth" / "corpus.jsonl")]
    users = [m.content for e in examples for m in e.messages if m.role == "user"]
    assert any(u.startswith("[llm]") for u in users)
    for e in examples:  # the calls still come from the live plan, so everything replays
        assert replay(e, Environment([ServerRuntime(plugins.registry.load("servers", e.task.servers[0]), seed=e.task.seed)]),
                      max_error_rate=1.0).ok

    fake_model.mode = "forgetful"  # never mentions the values: every user text must fall back
    exp = experiment(tmp_path / "f", examples=4, teacher="llm", llm=llm)
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = [from_json(r, Example) for r in read_jsonl(tmp_path / "f" / "t" / "synth" / "corpus.jsonl")]
    needing_values = [m.content for e in examples for m in e.messages if m.role == "user" and "_" in (m.content or "")]
    assert needing_values and not any(u.startswith("[llm]") for u in needing_values)


def test_llm_options_are_checked_with_paths(tmp_path, plugins):
    from prove_core.errors import ConfigError

    exp = experiment(tmp_path, examples=2, teacher="llm", llm={"base_ur1": "x"})
    with pytest.raises(ConfigError, match=r"\$\.synth\.llm: extra fields found \(base_ur1\)"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)


def test_unreachable_endpoint_is_a_clear_error():
    client = ChatClient(LLMConfig(base_url="http://127.0.0.1:9/v1", timeout_s=2))
    with pytest.raises(ProveError, match="LLM endpoint http://127.0.0.1:9/v1 failed"):
        client.complete([{"role": "user", "content": "hi"}])
