"""The LLM labeller and teacher against a real local HTTP server speaking the OpenAI API."""

import json

import pytest

from prove_core.env.runtime import Environment, ServerRuntime
from prove_core.errors import ProveError
from prove_core.model import Example, from_json, read_jsonl
from prove_core.synth.pipeline import synthesize
from prove_core.synth.validation import replay
from prove_plugins.synth.llm import ChatClient, EndpointUnavailable, LLMConfig, LLMLabeller
from prove_servers.banking import server as banking
from tests.support.chat_endpoint import ChatEndpoint, draft_of
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
        if self.mode == "forgetful":  # drops every value the draft holds
            return "[llm] please do the thing"
        return "[llm] " + draft_of(prompt)  # keeps every fact of the draft


@pytest.fixture()
def fake_model():
    model = FakeModel()
    with ChatEndpoint(model.reply) as endpoint:
        model.url = endpoint.url
        model.endpoint = endpoint
        yield model


def test_llm_labeller_keeps_only_real_verified_edges(fake_model):
    labeller = LLMLabeller(LLMLabeller.Config(llm=LLMConfig(base_url=fake_model.url, model="tiny", max_retries=2)))
    graph = labeller.label(Environment([ServerRuntime(banking)]))
    edges = {(e.source, e.target): e for e in graph.edges}
    assert edges[("list_accounts", "get_balance")].verified is True
    assert edges[("list_accounts", "get_balance")].entity == "account"
    assert ("list_accounts", "get_balance_v2") not in edges and ("list_accounts", "list_cards") not in edges
    assert edges[("list_accounts", "get_statement")].verified is False  # no output value is a month
    assert sum(r.startswith("You label") and source_of(r) == "list_accounts" for r in fake_model.requests) == 2


def corpus_of(run_dir):
    return [from_json(r, Example) for r in read_jsonl(run_dir / "t" / "synth" / "corpus.jsonl")]


def test_llm_teacher_writes_text_and_falls_back_when_values_are_missing(tmp_path, fake_model, plugins):
    llm = {"base_url": fake_model.url, "model": "tiny", "max_retries": 1}
    exp = experiment(tmp_path, examples=6, teacher="llm", llm=llm)
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = corpus_of(tmp_path)
    users = [m.content for e in examples for m in e.messages if m.role == "user"]
    assert any(u.startswith("[llm]") for u in users)
    for e in examples:  # the calls still come from the live plan, so everything replays
        assert replay(e, Environment([ServerRuntime(plugins.registry.load("servers", e.task.servers[0]), seed=e.task.seed)]),
                      max_error_rate=1.0).ok
    for e in examples:  # a companion clarification is the conversation's own (rewritten) beginning
        if e.id.endswith("-clarify"):
            main = next(m for m in examples if m.id == e.id.removesuffix("-clarify"))
            assert [m.content for m in e.messages] == [m.content for m in main.messages[:len(e.messages)]]
    assert report["teacher"]["turns_rewritten"] > 0 and report["teacher"]["endpoint_fallbacks"] == 0
    assert report["teacher"]["turns_kept_draft"] == 0  # a rewrite that keeps the draft's facts is never refused

    fake_model.mode = "forgetful"  # never mentions the values: every user text must fall back
    exp = experiment(tmp_path / "f", examples=4, teacher="llm", llm=llm)
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = corpus_of(tmp_path / "f")
    needing_values = [m.content for e in examples for m in e.messages if m.role == "user" and "_" in (m.content or "")]
    assert needing_values and not any(u.startswith("[llm]") for u in needing_values)
    assert report["teacher"]["rejected_dropped"] > 0 and report["teacher"]["turns_kept_draft"] > 0


def test_an_endpoint_down_stops_the_run_with_a_typed_error_and_a_rerun_continues(tmp_path, fake_model, plugins):
    llm = {"base_url": fake_model.url, "model": "tiny", "max_retries": 0, "request_retries": 2, "backoff_s": 0.01}
    exp = experiment(tmp_path, examples=8, teacher="llm", llm=llm)
    endpoint = fake_model.endpoint
    original = endpoint.reply
    answered = []

    def then_down(prompt):  # answers 40 requests, then the endpoint goes down
        answered.append(prompt)
        endpoint.down = len(answered) >= 40
        return original(prompt)

    endpoint.reply = then_down
    with pytest.raises(EndpointUnavailable, match=r"failed after 3 attempt\(s\): HTTP 503"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)
    first = [e.id for e in corpus_of(tmp_path)]
    assert first  # what was written before the endpoint went down is kept

    endpoint.reply, endpoint.down = original, False
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    ids = [e.id for e in corpus_of(tmp_path)]
    assert ids[:len(first)] == first and len(set(ids)) == len(ids)  # continued: nothing lost, nothing twice
    assert report["reached_target"] and report["resumed_from"] > 0


def test_with_template_fallback_a_down_endpoint_keeps_the_drafts_and_counts_them(tmp_path, fake_model, plugins):
    fake_model.endpoint.down = True
    llm = {"base_url": fake_model.url, "model": "tiny", "request_retries": 1, "backoff_s": 0.01,
           "on_endpoint_failure": "template", "cooldown_s": 0}
    report = synthesize(experiment(tmp_path, examples=4, teacher="llm", llm=llm), plugins, echo=lambda _: None,
                        progress=False)
    examples = corpus_of(tmp_path)
    noted = [e for e in examples if "teacher" in e.task.meta]
    assert report["reached_target"] and noted
    assert report["teacher"]["endpoint_fallbacks"] == len(noted) == report["teacher"]["examples"]
    assert not any((m.content or "").startswith("[llm]") for e in examples for m in e.messages)
    assert "| endpoint_fallbacks |" in (tmp_path / "t" / "synth" / "stats.md").read_text()


def test_llm_options_are_checked_with_paths(tmp_path, plugins):
    from prove_core.errors import ConfigError

    exp = experiment(tmp_path, examples=2, teacher="llm", llm={"base_ur1": "x"})
    with pytest.raises(ConfigError, match=r"\$\.synth\.llm: extra fields found \(base_ur1\)"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)
    exp = experiment(tmp_path, examples=2, teacher="llm", llm={"on_endpoint_failure": "retry"})
    with pytest.raises(ConfigError, match=r"\$\.synth\.llm\.on_endpoint_failure: .*retry"):
        synthesize(exp, plugins, echo=lambda _: None, progress=False)


def test_unreachable_endpoint_is_a_clear_error():
    client = ChatClient(LLMConfig(base_url="http://127.0.0.1:9/v1", timeout_s=2, backoff_s=0.01))
    with pytest.raises(ProveError, match=r"LLM endpoint http://127.0.0.1:9/v1 failed after 5 attempt\(s\)"):
        client.complete([{"role": "user", "content": "hi"}])
