"""`prove reward` end to end on hand-written rollouts against banking and shopping tasks, and the
`reward` stage of `prove run`."""

import json
import os
import subprocess
import sys

import attrs
import pytest

from prove_core.model import ToolCall, to_json
from prove_core.plugin.manager import Plugins
from prove_core.stages import run_experiment
from tests.support.reward_tasks import banking_transfer_task, example_for, shopping_checkout_task


def prove(*args, cwd=None):
    env = {**os.environ, "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "prove_core.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)


def openai_turns(calls):
    """One assistant message per call, each followed by its tool message."""
    out = [{"role": "user", "content": "please"}]
    for i, (name, args) in enumerate(calls):
        out.append({"role": "assistant", "content": None,
                    "tool_calls": [ToolCall(id=f"c{i}", name=name, arguments=args).to_openai()]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": "{}"})
    return out


def hermes(calls):
    return "".join(f'<tool_call>{json.dumps({"name": n, "arguments": a})}</tool_call>' for n, a in calls)


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    bank, shop = banking_transfer_task(), shopping_checkout_task()
    bank_gt = [(c.tool, c.arguments) for c in bank.calls]
    shop_gt = [(c.tool, c.arguments) for c in shop.calls]
    clarify = attrs.evolve(bank, calls=[], expected="clarify")
    records = [
        {"id": "bank-ground-truth", "task": to_json(bank), "messages": openai_turns(bank_gt)},
        {"id": "bank-hermes-swapped", "task": to_json(bank), "parser": "hermes",
         "completion": [hermes([bank_gt[0], bank_gt[2]]), hermes([bank_gt[1], bank_gt[3]])]},
        {"id": "shop-ground-truth-mistral", "task": to_json(shop), "parser": "mistral",
         "completion": "[TOOL_CALLS]" + json.dumps([{"name": n, "arguments": a} for n, a in shop_gt])},
        {"id": "shop-spam", "task": to_json(shop), "messages": openai_turns(shop_gt + [shop_gt[0]] * 6)},
        {"id": "bank-malformed", "task": to_json(bank), "completion": "<tool_call>{\"name\": \"find_customers\", "},
        {"id": "clarify-asks", "task": to_json(clarify), "messages": [{"role": "assistant", "content": "Which account?"}]},
        {"id": "clarify-calls", "task": to_json(clarify), "messages": openai_turns(bank_gt[:1])},
        to_json(example_for(bank, "corpus-example")),  # a training example is a valid record too
    ]
    path = tmp_path_factory.mktemp("rollouts") / "hand.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_prove_reward_scores_hand_written_rollouts(rollouts, tmp_path):
    out = tmp_path / "report"
    config = tmp_path / "paper.toml"  # the paper's numbers; the default preset (guarded) adds terms
    config.write_text('[[servers]]\nname = "banking"\n[[servers]]\nname = "shopping"\n[reward]\npreset = "paper"\n')
    proc = prove("reward", str(rollouts), "--out", str(out), "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "8 rollouts scored" in proc.stdout
    for name in ("validity", "coverage", "efficiency", "tool_name", "arguments", "abstention"):
        assert name in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["rollouts"] == 8 and not report["invalid"]
    scores = {json.loads(line)["id"]: json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()}
    assert scores["bank-ground-truth"]["total"] == pytest.approx(1.3)
    assert scores["shop-ground-truth-mistral"]["total"] == pytest.approx(1.3)
    assert scores["corpus-example"]["total"] == pytest.approx(1.3)
    swapped = scores["bank-hermes-swapped"]["components"]
    assert swapped["coverage"]["value"] == pytest.approx(3 / 4)
    spam = scores["shop-spam"]["components"]["efficiency"]
    assert spam["value"] == pytest.approx(-0.5 * (12 - 9) / 9) and spam["details"]["budget"] == 9
    malformed = scores["bank-malformed"]["components"]["validity"]
    assert malformed["value"] == 0.0 and malformed["details"]["calls"][0]["failed_tier"] == 1
    assert scores["clarify-asks"]["total"] == 1.0 and scores["clarify-calls"]["total"] == 0.0
    # means: over the rollouts each component applies to
    assert report["components"]["abstention"]["n"] == 2 and report["components"]["abstention"]["mean"] == 0.5
    assert report["components"]["validity"]["n"] == 6
    # the worst rollouts come first, with their explanations
    # ranked by how far each falls below its attainable best (1.3 with calls, 1.0 without)
    assert [w["id"] for w in report["worst"][:2]] == ["bank-malformed", "clarify-calls"]
    shortfalls = [w["best"] - w["total"] for w in report["worst"]]
    assert shortfalls == sorted(shortfalls, reverse=True) and shortfalls[-1] == 0.0
    assert scores["clarify-asks"]["best"] == 1.0 and scores["bank-ground-truth"]["best"] == pytest.approx(1.3)
    markdown = (out / "report.md").read_text()
    assert "lowest-scoring" in markdown and "failed tier 1" in markdown and "hist_total.png" in markdown
    for png in report["histograms"]:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"hist_total.png", "hist_validity.png", "hist_efficiency.png"} <= set(report["histograms"])


def test_prove_reward_json_and_invalid_records(rollouts, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(rollouts.read_text() + "{not json\n" + json.dumps({"id": "no-task", "completion": "x"}) + "\n")
    proc = prove("reward", str(bad), "--out", str(tmp_path / "r"), "--json", "--no-plots")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["rollouts"] == 8 and [i["line"] for i in report["invalid"]] == [9, 10]
    assert report["histograms"] == []
    assert proc.stderr.strip().startswith("error: 2 record(s)") and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, fragment", [
    (["reward", "missing.jsonl"], "does not exist"),
    (["reward", "{rollouts}", "--parser", "nope"], "no parser named 'nope'"),
    (["reward", "{rollouts}", "--config", "{config}"], "$.reward.components[0].name: no reward named 'validty'"),
])
def test_prove_reward_user_errors(rollouts, tmp_path, args, fragment):
    config = tmp_path / "exp.toml"
    config.write_text('[[servers]]\nname = "banking"\n[[reward.components]]\nname = "validty"\n')
    args = [a.format(rollouts=rollouts, config=config) for a in args]
    proc = prove(*args, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 1 and fragment in proc.stderr and proc.stderr.startswith("error: ")


def test_reward_stage_of_prove_run_with_final_state(rollouts, tmp_path):
    config = tmp_path / "exp.toml"
    config.write_text(f"""
name = "scored"
output_dir = "{tmp_path}"
stages = ["reward"]
[[servers]]
name = "banking"
[[servers]]
name = "shopping"
[reward]
input = "{rollouts}"
worst = 2
plots = false
[[reward.components]]
name = "validity"
[[reward.components]]
name = "final_state"
weight = 1.0
""")
    lines = []
    summary = run_experiment(config, plugins=Plugins().load(autoload=False), echo=lines.append)
    stage = summary["stages"]["reward"]
    assert summary["ok"] and stage["rollouts"] == 8
    report = json.loads((tmp_path / "scored" / "reward" / "report.json").read_text())
    assert report["weights"] == {"validity": 0.5, "final_state": 1.0} and len(report["worst"]) == 2
    score_lines = (tmp_path / "scored" / "reward" / "scores.jsonl").read_text().splitlines()
    scores = {json.loads(x)["id"]: json.loads(x) for x in score_lines}
    assert scores["bank-ground-truth"]["components"]["final_state"]["value"] == 1.0
    assert scores["shop-spam"]["components"]["final_state"]["value"] == 1.0  # repeated searches change nothing
    assert any("rollouts scored" in line for line in lines)


def test_reward_stage_needs_an_input(tmp_path):
    from prove_core.errors import ConfigError

    config = tmp_path / "exp.toml"
    config.write_text(f'name = "x"\noutput_dir = "{tmp_path}"\nstages = ["reward"]\n[[servers]]\nname = "banking"\n')
    with pytest.raises(ConfigError, match=r"\$\.reward\.input"):
        run_experiment(config, plugins=Plugins().load(autoload=False), echo=lambda _: None)


def test_reward_help_names_the_default_preset():
    """Issue 27: ``prove reward --help`` says which preset scores without a config (it said paper)."""
    from click.testing import CliRunner

    from prove_core.cli import cli
    from prove_core.reward.core import DEFAULT_PRESET

    text = " ".join(CliRunner().invoke(cli, ["reward", "--help"]).output.split())
    assert f"(default: the {DEFAULT_PRESET} preset)" in text and "paper reward" not in text
