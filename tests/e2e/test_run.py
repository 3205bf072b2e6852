"""`prove run`: the embedded quickstart end to end, and custom experiments."""

import json
import os
import subprocess
import sys

from prove_core.model import Task, from_json, read_jsonl
from prove_core.plugin.manager import Plugins
from prove_core.stages import run_experiment


def test_the_scripted_episode_runs_end_to_end_from_the_cli(tmp_path):
    from importlib import resources

    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    episode = str(resources.files("prove_core.defaults").joinpath("episode.toml"))
    proc = subprocess.run([sys.executable, "-m", "prove_core.cli", "run", episode], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 unexpected outcomes" in proc.stdout
    (record,) = list(read_jsonl(tmp_path / "runs" / "episode" / "episode.jsonl"))
    task = from_json(record["task"], Task)
    assert task.servers == ["banking", "shopping"]
    by_id = {c.id: c for c in task.calls}
    # ids flowed from live results: the transfer depends on the lookups that produced its ids
    assert set(by_id["transfer"].depends_on) == {"customers", "accounts"}
    assert by_id["receipt"].depends_on == ["transfer"]
    assert by_id["receipt"].arguments["transaction_id"].startswith("txn_")
    overdraw = next(s for s in record["steps"] if s["id"] == "overdraw")
    assert overdraw["is_error"] and overdraw["content"]["reason"] == "INSUFFICIENT_FUNDS"
    summary = json.loads((tmp_path / "runs" / "episode" / "summary.json").read_text())
    assert summary["ok"] and summary["stages"]["episode"]["calls"] == 13


def write(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def plugins():
    return Plugins().load(autoload=False)


def test_an_unexpected_failure_makes_the_run_fail(tmp_path):
    config = write(tmp_path, f"""
name = "t"
output_dir = "{tmp_path}"
[[servers]]
name = "banking"
[[episode.steps]]
tool = "get_balance"
args = {{ account_id = "acc_missing" }}
""")
    lines = []
    summary = run_experiment(config, plugins=plugins(), echo=lines.append)
    assert not summary["ok"] and any(line.startswith("FAIL") for line in lines)


def test_server_options_and_seed_reach_the_sessions(tmp_path):
    config = write(tmp_path, f"""
name = "sized"
output_dir = "{tmp_path}"
[[servers]]
name = "shopping"
seed = 5
options = {{ products = 120 }}
[[episode.steps]]
id = "all"
tool = "search_products"
args = {{ limit = 1 }}
""")
    run_experiment(config, plugins=plugins(), echo=lambda _: None)
    (record,) = list(read_jsonl(tmp_path / "sized" / "episode.jsonl"))
    assert record["steps"][0]["content"]["total"] == 120


def test_bad_references_are_config_errors(tmp_path):
    import pytest

    from prove_core.errors import ConfigError

    config = write(tmp_path, f"""
output_dir = "{tmp_path}"
[[servers]]
name = "shopping"
[[episode.steps]]
tool = "get_product"
args = {{ product_id = "${{nothing.id}}" }}
""")
    with pytest.raises(ConfigError, match=r"\$\.episode\.steps\[0\]\.args\.product_id: 'nothing' is not an earlier step"):
        run_experiment(config, plugins=plugins(), echo=lambda _: None)
