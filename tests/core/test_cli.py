"""The `prove` CLI as a user runs it: a real subprocess, exit codes, one-line errors."""

import json
import os
import subprocess
import sys

import pytest


def prove(*args, check=False, env=None):
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "prove_core.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_servers_list_json_has_name_domain_and_tool_count():
    rows = json.loads(prove("servers", "list", "--json", check=True).stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["banking"]["tools"] == 17 and by_name["banking"]["domain"] == "finance"
    assert by_name["shopping"]["tools"] == 23 and by_name["shopping"]["domain"] == "commerce"


def test_plugins_json_lists_components_with_distribution():
    data = json.loads(prove("plugins", "--json", check=True).stdout)
    servers = {c["name"]: c for c in data["components"] if c["kind"] == "server"}
    assert servers["banking"]["distribution"] == "prove"
    assert data["failures"] == []


def test_tools_are_printed_in_openai_function_format():
    tools = json.loads(prove("servers", "tools", "banking", "--json", check=True).stdout)
    assert len(tools) == 17
    for tool in tools:
        assert tool["type"] == "function"
        fn = tool["function"]
        assert fn["name"] and fn["description"] and fn["parameters"]["type"] == "object"


def test_call_prints_result_json_and_exits_zero():
    out = prove("servers", "call", "banking", "find_customers", "--args", '{"query": "an"}', check=True).stdout
    assert isinstance(json.loads(out), dict)


def test_failed_call_prints_typed_error_and_exits_one():
    proc = prove("servers", "call", "banking", "get_balance", "--args", '{"account_id": "acc_nope"}')
    assert proc.returncode == 1
    error = json.loads(proc.stdout)
    assert error["code"] == "NOT_FOUND" and error["reason"] and error["message"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["servers", "call", "banking", "get_balance", "--args", "{not json"], "--args is not valid JSON"),
        (["servers", "tools", "nope"], "no server named 'nope'"),
        (["servers", "list", "--bogus"], "No such option"),
        (["run", "/does/not/exist.toml"], "does not exist"),
        (["serve", "banking", "banking"], "named twice"),
    ],
)
def test_bad_input_gives_one_line_error_and_exit_one(args, fragment):
    proc = prove(*args)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], proc.stderr


def test_listing_never_imports_torch_or_trainers():
    code = (
        "import sys\n"
        "from prove_core.cli import main\n"
        "for argv in (['plugins', '--json'], ['servers', 'list', '--json']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'vllm', 'ray', 'openrlhf') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


def test_help_is_helpful():
    out = prove("--help", check=True).stdout
    for command in ("plugins", "servers", "serve", "audit", "run"):
        assert command in out
    assert "_meta.session_id" in prove("serve", "--help", check=True).stdout


def test_log_json_gives_json_lines_with_run_and_session_context(tmp_path):
    from importlib import resources

    episode = str(resources.files("prove_core.defaults").joinpath("episode.toml"))
    proc = subprocess.run([sys.executable, "-m", "prove_core.cli", "--log-json", "--log-level", "info", "run", episode],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 13
    assert all(e["run"] == "episode" and e["session"] and e["level"] == "info" for e in steps)
    assert {e["tool"] for e in steps} >= {"banking_transfer_between_accounts", "shopping_checkout"}


def test_log_level_is_validated():
    proc = prove("--log-level", "loud", "plugins")
    assert proc.returncode == 1 and "--log-level" in proc.stderr


def test_logging_writes_to_the_current_stderr_not_the_one_at_configure_time(monkeypatch):
    import io

    import structlog

    from prove_core.logging import configure

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure(level="info")
    log = structlog.get_logger()
    log.info("to the first stream")
    first.close()  # as a CLI runner closes its captured stream
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    log.info("to the second stream")
    assert "to the second stream" in second.getvalue()


def test_listings_cut_long_text_between_words_on_a_terminal_and_never_in_a_pipe(monkeypatch):
    import os
    import shutil

    from prove_core.cli import _fit, _last_column

    assert _fit("Replays the task's reference solution (the upper bound).", 30) == "Replays the task's reference…"
    assert _fit("short enough", 30) == "short enough"
    words = "Repeats one call several times per turn (what efficiency punishes)."
    for width in range(10, len(words)):
        cut = _fit(words, width)
        assert len(cut) <= width and cut.endswith("…") and words.startswith(cut[:-1])
        assert words[len(cut) - 1] in " ,;:(-"  # the cut falls between words
    rows, header = [["client", "spammer", words]], ["kind", "name", "summary"]
    assert _last_column(rows, header) == rows  # pytest's stdout is no terminal: every word
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a, **k: os.terminal_size((60, 24)))
    (shown,) = _last_column(rows, header)
    assert shown[:2] == ["client", "spammer"] and shown[2] == "Repeats one call several times per turn…"  # 60 - 17
