from pathlib import Path

import pytest

from prove_core.errors import ConfigError
from prove_core.model import Example, from_json, read_jsonl
from prove_core.synth.importers import when2call, xlam_irrelevance
from prove_core.synth.pipeline import synthesize
from tests.synth.conftest import experiment

FIXTURES = Path(__file__).parent / "fixtures"


def test_when2call_maps_answer_kinds_to_behaviours():
    examples = list(when2call(FIXTURES / "when2call.jsonl", system="sys"))
    by_id = {e.id: e for e in examples}
    assert set(by_id) == {"when2call-w2c-1", "when2call-w2c-2", "when2call-w2c-4"}  # tool_call skipped
    assert by_id["when2call-w2c-1"].task.expected == "abstain"
    assert by_id["when2call-w2c-2"].task.expected == "clarify"
    assert by_id["when2call-w2c-2"].messages[-1].content == "Which restaurant, and for how many people?"
    tool = by_id["when2call-w2c-1"].tools[0]["function"]
    assert tool["name"] == "get_weather" and tool["parameters"]["required"] == ["city"]


def test_xlam_parameters_become_json_schema():
    (first, second) = xlam_irrelevance(FIXTURES / "xlam_irrelevance.json", system="sys", decline=lambda n: f"no {n}")
    params = first.tools[0]["function"]["parameters"]
    assert params["properties"]["max_stops"]["type"] == "integer"
    assert params["required"] == ["origin", "destination"]
    assert first.task.expected == "abstain" and first.messages[-1].content == "no 0"


def test_bad_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        list(when2call(tmp_path / "nope.jsonl", system="s"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"uuid": 1}\n{oops\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2"):
        list(when2call(bad, system="s"))


def test_imports_join_the_corpus(tmp_path, plugins):
    exp = experiment(tmp_path, examples=3, imports=[
        {"format": "when2call", "path": str(FIXTURES / "when2call.jsonl")},
        {"format": "xlam_irrelevance", "path": str(FIXTURES / "xlam_irrelevance.json"), "limit": 1},
    ])
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = [from_json(r, Example) for r in read_jsonl(tmp_path / "t" / "synth" / "corpus.jsonl")]
    sources = [e.task.meta.get("source") for e in examples]
    assert sources.count("when2call") == 3 and sources.count("xlam-irrelevance") == 1
    assert report["by_server"]["imported:when2call"] == 3
