"""PROVE tasks served as OpenEnv environments, driven over real HTTP/WebSocket on loopback by
OpenEnv's own clients (``GenericEnvClient``, ``MCPToolClient``): reset on a corpus task, the
ground truth played as MCP tool-call actions with the same state hashes as the in-process fast
path, the PROVE reward at the end, isolation between concurrent clients, and drifted tasks
refused at reset with a typed error."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (pip install 'prove[openenv]')")

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from openenv.core import GenericEnvClient, MCPToolClient  # noqa: E402

from prove_core.config import load_experiment  # noqa: E402
from prove_core.env.runtime import Environments  # noqa: E402
from prove_core.errors import ProveError  # noqa: E402
from prove_core.model import Example, from_json, read_jsonl, to_json  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.reward.core import Rollout, build_reward  # noqa: E402
from prove_core.reward.rollout import opening, user_turns  # noqa: E402
from prove_plugins.integrations.openenv_server import EpisodeError, ProveAction, build  # noqa: E402


@pytest.fixture(scope="module")
def plugins():
    return Plugins().load(autoload=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, plugins):
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("corpus")
    exp = load_experiment({"name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 8, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")}})
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


@pytest.fixture(scope="module")
def examples(corpus):
    return [from_json(record, Example) for record in read_jsonl(corpus)]


def fast_path_hashes(plugins, example):
    """The state hash before and after each ground-truth call, replayed on a fresh in-process
    session, plus each call's structured result."""
    env = Environments(plugins.registry, {})(example.task)
    sid = env.new_session()
    try:
        hashes, results = [env.state_hash(sid)], []
        for call in example.task.calls:
            results.append(env.call(sid, call.tool, call.arguments).structured)
            hashes.append(env.state_hash(sid))
        return hashes, results
    finally:
        env.close(sid)


@pytest.fixture(scope="module")
def writing(plugins, examples):
    """A call task whose ground truth changes the state (so a shared session would show)."""
    for example in examples:
        if example.task.expected == "call" and len(example.task.calls) >= 2:
            hashes, results = fast_path_hashes(plugins, example)
            if len(set(hashes)) > 1:
                return example, hashes, results
    raise AssertionError("the corpus has no call task whose ground truth writes")


def free_port_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="module")
def server(plugins, corpus):
    """The OpenEnv app of `prove openenv serve banking --corpus ...`, run by uvicorn on a free
    loopback port in this process (so the tests can look at the live PROVE sessions too)."""
    served = build(["banking"], corpus=corpus, plugins=plugins)
    sock = free_port_socket()
    uv = uvicorn.Server(uvicorn.Config(served.app(max_concurrent_envs=16), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        assert time.monotonic() < deadline, "the OpenEnv server did not start"
        time.sleep(0.05)
    yield served, f"http://127.0.0.1:{sock.getsockname()[1]}"
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


def live_sessions(served, example) -> int:
    return len(served.environments(example.task).runtimes["banking"])


def wait_for_sessions(served, example, expected: int) -> int:
    """Live PROVE sessions once the server has released a closed connection's episode."""
    deadline = time.monotonic() + 5
    while live_sessions(served, example) != expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return live_sessions(served, example)


def play_ground_truth(env, example):
    """Each ground-truth call as an MCP call_tool action, then prose turns until the end."""
    steps = [env.step({"type": "call_tool", "tool_name": c.tool, "arguments": c.arguments}) for c in example.task.calls]
    result = steps[-1]
    for _ in range(6):
        if result.done:
            break
        result = env.step({"type": "message", "content": "Done."})
    return steps, result


def in_process_reward(plugins, example) -> float:
    """The reward of the same episode scored in process: one call a turn, then "Done." for each
    user turn."""
    reward = build_reward(None, plugins.registry)
    calls = Rollout.ground_truth(example.task, id=example.id, tools=example.tools).attempts
    rollout = Rollout(id=example.id, task=example.task, attempts=calls, tools=example.tools,
                      content="\n".join(["Done."] * len(user_turns(example)[:5])))
    return reward.score(rollout).total


# -- the documented example: reset, tool calls, state, reward -----------------------------------------------


def test_a_task_played_over_openenv_matches_the_fast_path_and_earns_the_ground_truth_reward(server, plugins, writing):
    served, url = server
    example, hashes, results = writing
    with GenericEnvClient(base_url=url).sync() as env:
        result = env.reset(task_id=example.id)
        obs = result.observation
        assert not result.done and result.reward is None
        assert obs["task_id"] == example.id
        assert obs["messages"] == [*opening(example), {"role": "user", "content": user_turns(example)[0]}]
        offered = [t["function"]["name"] for t in example.tools]
        assert [t["name"] for t in obs["tools"]] == offered
        assert obs["openai_tools"] == example.tools
        state = env.state()
        assert state["state_hash"] == hashes[0] == example.task.initial_state_hash
        assert state["step_count"] == 0 and state["episode_id"] == obs["episode_id"]

        for i, call in enumerate(example.task.calls):
            step = env.step({"type": "call_tool", "tool_name": call.tool, "arguments": call.arguments})
            assert step.observation["tool_name"] == call.tool
            assert step.observation["result"]["structured_content"] == results[i]
            assert json.loads(step.observation["result"]["content"][0]["text"]) == results[i]
            assert env.state()["state_hash"] == hashes[i + 1]  # the same state as the fast path, call by call
        assert env.state()["calls"] == len(example.task.calls)

        result = step
        while not result.done:
            result = env.step({"type": "message", "content": "Done."})
            assert len(result.observation["messages"]) <= 1  # the next user turn, if any
        obs = result.observation
        assert obs["end_reason"] == "answered"
        assert result.reward == pytest.approx(obs["reward_best"]) and result.reward > 1.0  # the ground truth's maximum
        assert result.reward == pytest.approx(in_process_reward(plugins, example))
        assert {"validity", "coverage", "efficiency", "tool_name", "arguments"} <= set(obs["reward_components"])
        assert obs["reward_components"]["coverage"] == 1.0
        assert set(obs["reward_details"]) >= set(obs["reward_components"])
        final = env.state()
        assert final["done"] and final["reward"] == result.reward and final["state_hash"] == hashes[-1]
        with pytest.raises(RuntimeError, match="EPISODE_DONE"):
            env.step({"type": "message", "content": "again"})


def test_a_wrong_or_empty_episode_earns_less(server, writing):
    served, url = server
    example, hashes, _ = writing
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(task_id=example.id)
        wrong = env.step({"type": "call_tool", "tool_name": "no_such_tool", "arguments": {}})
        assert wrong.observation["result"]["is_error"]
        assert wrong.observation["result"]["structured_content"]["code"] == "UNKNOWN_TOOL"
        assert env.state()["state_hash"] == hashes[0]  # nothing ran
        result = wrong
        while not result.done:
            result = env.step({"type": "message", "content": "I did it."})
        wrong_reward = result.reward
        assert result.observation["reward_components"]["coverage"] == 0.0

        env.reset(task_id=example.id)
        result = env.step({"type": "end"})
        assert result.done and result.observation["end_reason"] == "ended"
    assert wrong_reward < result.observation["reward_best"] - 1.0
    assert result.reward < result.observation["reward_best"] - 1.0


def test_the_assistant_turn_limit_ends_the_episode(server, writing):
    served, url = server
    example, _, _ = writing
    read = example.task.calls[0]
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(task_id=example.id)
        for turn in range(1, served.limits.max_assistant_turns + 1):
            result = env.step({"type": "call_tool", "tool_name": read.tool, "arguments": read.arguments})
            assert result.done == (turn == served.limits.max_assistant_turns)
        assert result.observation["end_reason"] == "turn_limit" and result.reward is not None
        assert env.state()["assistant_turns"] == served.limits.max_assistant_turns


def test_mcp_tool_client_lists_and_calls_the_tools_of_the_task(server, writing):
    served, url = server
    example, _, results = writing
    with MCPToolClient(base_url=url).sync() as env:
        env.reset(task_id=example.id)
        assert [t.name for t in env.list_tools()] == [t["function"]["name"] for t in example.tools]
        first = example.task.calls[0]
        assert env.call_tool(first.tool, **first.arguments) == results[0]


# -- sessions ------------------------------------------------------------------------------------------------


def test_concurrent_clients_do_not_share_state(server, plugins, writing):
    served, url = server
    example, hashes, _ = writing
    before = wait_for_sessions(served, example, 0)  # every earlier episode has released its session
    with GenericEnvClient(base_url=url).sync() as a, GenericEnvClient(base_url=url).sync() as b:
        a.reset(task_id=example.id)
        b.reset(task_id=example.id)
        assert wait_for_sessions(served, example, before + 2) == before + 2  # one PROVE session each
        for call in example.task.calls:
            a.step({"type": "call_tool", "tool_name": call.tool, "arguments": call.arguments})
        assert a.state()["state_hash"] == hashes[-1]
        assert b.state()["state_hash"] == hashes[0]  # b's session never saw a's writes
        assert a.state()["episode_id"] != b.state()["episode_id"]

    def episode(_: int) -> tuple[str, float]:
        with GenericEnvClient(base_url=url).sync() as env:
            env.reset(task_id=example.id)
            _, result = play_ground_truth(env, example)
            return env.state()["state_hash"], result.reward

    with ThreadPoolExecutor(max_workers=4) as pool:
        played = list(pool.map(episode, range(4)))
    assert {h for h, _ in played} == {hashes[-1]}  # each wrote once, on its own session
    assert len({r for _, r in played}) == 1 and played[0][1] > 1.0
    assert wait_for_sessions(served, example, before) == before  # closing a connection releases its session


# -- drift and bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("field,value,what", [("schema_hash", "0" * 20, "schema"),
                                              ("initial_state_hash", "banking:" + "0" * 64, "state")])
def test_a_drifted_task_fails_reset_with_a_typed_error(server, writing, field, value, what):
    served, url = server
    example, _, _ = writing
    record = copy.deepcopy(to_json(example))  # to_json shares the example's meta dict
    if field == "schema_hash":
        record["task"]["meta"]["schema_hash"] = value
    else:
        record["task"][field] = value
    before = wait_for_sessions(served, example, 0)
    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match="TASK_DRIFT") as caught:
            env.reset(task=record)
        assert "Traceback" not in str(caught.value)
        with pytest.raises(RuntimeError, match="NO_EPISODE"):  # nothing to play, nothing to train on
            env.step({"type": "call_tool", "tool_name": example.task.calls[0].tool, "arguments": {}})
        assert live_sessions(served, example) == before  # the session opened for the check is closed
        assert env.reset(task=to_json(example)).observation["task_id"] == example.id  # the record untampered plays

    response = httpx.post(f"{url}/reset", json={"task": record}, timeout=30)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "FAILED_PRECONDITION" and body["reason"] == "TASK_DRIFT"
    assert body["details"]["what"] == what and body["details"]["expected"] == value
    assert wait_for_sessions(served, example, before) == before


def test_bad_requests_get_typed_errors(server, writing):
    served, url = server
    example, _, _ = writing
    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match="NO_EPISODE"):
            env.step({"type": "message", "content": "hi"})
        with pytest.raises(RuntimeError, match="UNKNOWN_TASK: no task 'nope' in the corpus"):
            env.reset(task_id="nope")
        with pytest.raises(RuntimeError, match="BAD_RESET: unknown reset argument 'taskid'"):
            env.reset(taskid=example.id)
        with pytest.raises(RuntimeError, match="BAD_TASK"):
            env.reset(task={"task": {"servers": ["banking"]}})  # not an example
        with pytest.raises(RuntimeError, match="SERVER_NOT_SERVED"):
            env.reset(task={"servers": ["trading"], "expected": "abstain"})
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"type": "call_tool"})  # no tool name
        sampled = env.reset(seed=7).observation["task_id"]
        assert sampled in served.examples and env.reset(seed=7).observation["task_id"] == sampled

    response = httpx.post(f"{url}/reset", json={"task_id": "nope"}, timeout=30)
    assert response.status_code == 404 and response.json()["reason"] == "UNKNOWN_TASK"
    response = httpx.post(f"{url}/step", json={"action": {"type": "message", "content": "hi"}}, timeout=30)
    assert response.status_code == 409 and response.json()["reason"] == "NO_EPISODE"  # HTTP is stateless in OpenEnv
    assert httpx.get(f"{url}/health", timeout=30).json()["status"] == "healthy"
    response = httpx.get(f"{url}/health", headers={"Host": "evil.example"}, timeout=30)
    assert response.status_code == 421  # DNS rebinding guard


def test_free_play_without_a_corpus_runs_on_the_served_servers_unscored(plugins):
    served = build(["banking"], plugins=plugins, seed=3)
    env = served.environment()
    obs = env.reset()
    assert obs.messages == [] and obs.task_id is None
    assert {t.name for t in obs.tools} == set(plugins.registry.load("servers", "banking").tools)
    assert env.state.seed == 3
    found = env.step(ProveAction(tool_name="find_customers", arguments={"query": "example"}))
    assert not found.result["is_error"] and found.result["data"]["customers"]
    missing = env.step(ProveAction(tool_name="list_accounts", arguments={}))
    assert missing.result["is_error"] and missing.result["data"]["code"] == "INVALID_ARGUMENT"  # typed, as on the fast path
    with pytest.raises(EpisodeError, match="UNKNOWN_TASK: no corpus is served"):
        env.reset(task_id="x")
    env.reset(seed=5)
    end = env.step(ProveAction(type="message", content="Nothing to do."))
    assert end.done and end.reward is None and end.end_reason == "answered"
    env.close()


def test_build_refuses_unknown_servers_and_missing_or_foreign_corpora(plugins, corpus, tmp_path):
    with pytest.raises(ProveError, match="no server named 'nosuch'"):
        build(["nosuch"], plugins=plugins)
    with pytest.raises(ProveError, match="does not exist"):
        build(["banking"], corpus=tmp_path / "missing.jsonl", plugins=plugins)
    with pytest.raises(ProveError, match="not served"):
        build(["trading"], corpus=corpus, plugins=plugins)


# -- the command line ------------------------------------------------------------------------------------------


@pytest.mark.slow  # spawns the command line
def test_prove_openenv_serve_command_line(corpus, writing, capsys):
    from prove_core.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["openenv", "serve", "nosuch"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no server named 'nosuch'")

    example, hashes, _ = writing
    sock = free_port_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "prove_core", "openenv", "serve", "banking", "--corpus", str(corpus),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "prove openenv serve did not come up"
            time.sleep(0.2)
        with GenericEnvClient(base_url=url).sync() as env:
            assert env.reset(task_id=example.id).observation["task_id"] == example.id
            call = example.task.calls[0]
            env.step({"type": "call_tool", "tool_name": call.tool, "arguments": call.arguments})
            assert env.state()["state_hash"] == hashes[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_documented_example_runs_as_written(server):
    """docs/integrations.md's "Play an episode" block, run as written against the served corpus (only
    the address is this test's)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    section = text[text.index("### Play an episode"):]
    block = section[section.index("```python") + len("```python"):]
    block = block[: block.index("```")]
    assert "GenericEnvClient" in block and "env.reset(" in block and "result.reward" in block
    _, url = server
    printed: list[str] = []
    scope = {"print": lambda *args: printed.append(" ".join(map(str, args)))}
    exec(compile(block.replace("http://127.0.0.1:8000", url), "docs/integrations.md", "exec"), scope)
    assert scope["result"].done and isinstance(scope["result"].reward, float)
    assert scope["messages"][0]["role"] == "system" and printed  # the opening, and what the example prints
