import json
import os
import subprocess
import sys

import pytest

from prove_core.errors import ProveError
from prove_core.model import Example, GroundTruthCall, JsonlWriter, Message, Task, ToolCall, from_json, read_jsonl, to_json


def example(i=0):
    call = ToolCall(id="c1", name="get_balance", arguments={"account_id": "acc_1"})
    return Example(
        id=f"ex-{i}",
        messages=[
            Message(role="system", content="You are a bank assistant."),
            Message(role="user", content="What is my balance?"),
            Message(role="assistant", content=None, tool_calls=[call]),
            Message(role="tool", content='{"balance": 12.5}', tool_call_id="c1", name="get_balance"),
            Message(role="assistant", content="Your balance is $12.50."),
        ],
        tools=[{"type": "function", "function": {"name": "get_balance", "parameters": {"type": "object"}}}],
        task=Task(
            servers=["banking"],
            seed=7,
            calls=[
                GroundTruthCall(id="g1", tool="list_accounts"),
                GroundTruthCall(id="g2", tool="get_balance", arguments={"account_id": "acc_1"}, depends_on=["g1"]),
            ],
            expected="call",
            meta={"stratum": "complete"},
        ),
    )


def test_example_round_trips_losslessly_through_json_lines(tmp_path):
    ex = example()
    line = json.dumps(to_json(ex))
    assert from_json(json.loads(line), Example) == ex


def test_openai_rendering():
    msg = example().messages[2].to_openai()
    assert msg["tool_calls"][0]["function"] == {"name": "get_balance", "arguments": '{"account_id": "acc_1"}'}


def test_invalid_records_are_rejected_with_paths():
    data = to_json(example())
    data["task"]["expected"] = "maybe"
    with pytest.raises(ProveError, match=r"\$\.task\.expected"):
        from_json(data, Example)


def test_dependency_edges_must_point_backwards():
    with pytest.raises(ValueError, match="do not come before"):
        Task(servers=["b"], calls=[GroundTruthCall(id="a", tool="x", depends_on=["b"]), GroundTruthCall(id="b", tool="y")])


def test_writer_skips_duplicates_and_resumes(tmp_path):
    path = tmp_path / "out.jsonl"
    with JsonlWriter(path) as w:
        assert w.write({"id": "a", "v": 1}) and not w.write({"id": "a", "v": 2})
    with JsonlWriter(path) as w:
        assert "a" in w and not w.write({"id": "a"}) and w.write({"id": "b"})
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]


def test_torn_last_line_is_dropped_and_rewritten(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b", "v"')  # a crash in the middle of a write
    assert [r["id"] for r in read_jsonl(path)] == ["a"]
    with JsonlWriter(path) as w:
        w.write({"id": "b"})
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]


def test_sigkill_mid_run_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "out.jsonl"
    script = (
        "import sys, time\n"
        "from prove_core.model import JsonlWriter\n"
        f"w = JsonlWriter({str(path)!r})\n"
        "for i in range(100000):\n"
        "    if w.write({'id': i}): print(i, flush=True)\n"
        "    time.sleep(0.001)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    for _ in range(50):
        proc.stdout.readline()
    proc.kill()
    proc.wait()
    done = [r["id"] for r in read_jsonl(path)]
    assert done == list(range(len(done))) and len(done) >= 50
    proc = subprocess.run([sys.executable, "-c", script.replace("100000", str(len(done) + 20))], env=env,
                          capture_output=True, text=True)
    assert [r["id"] for r in read_jsonl(path)] == list(range(len(done) + 20))
