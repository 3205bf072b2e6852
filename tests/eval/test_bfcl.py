"""BFCL v4 multi-turn played as BFCL's own pipeline plays it and scored by BFCL's own checker: the
oracle scores 100%, no-call 0%, under both protocols; calls run through BFCL's executor (unsafe ones
are not evaluated); a failed request fails its entry and the run goes on, with BFCL's request
settings unless the model's options say otherwise. BFCL's backends are also PROVE servers.
(tests/eval/test_bfcl_fidelity.py compares the evaluator with BFCL's pipeline entry by entry.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prove_core.config import ModelConfig
from prove_core.env.runtime import ServerRuntime
from prove_core.eval.core import EvalContext, Reference, build_client, outcomes_of, run_evaluation
from prove_core.model import ToolCall
from prove_core.reward.rollout import PolicyTurn
from prove_plugins.train.models.clients import OracleConfig, OraclePolicy
from tests.eval.conftest import eval_experiment, message

SUBSET = 6  # entries per category in these tests; `prove eval --benchmark bfcl` runs all 800


def _run(plugins, policy, **options):
    from prove_plugins.eval.bfcl import Bfcl, BfclConfig

    context = EvalContext(registry=plugins.registry, experiment=None, out_dir=Path("."), model="m")
    return list(Bfcl(BfclConfig(**{"limit": SUBSET, **options})).evaluate(policy, context))


@pytest.mark.parametrize("protocol", ["fc", "prompting"])
def test_oracle_scores_100_and_no_call_0_through_bfcls_checker(bfcl, plugins, protocol):
    oracle = _run(plugins, OraclePolicy(OracleConfig()), protocol=protocol)
    assert len(oracle) == 4 * SUBSET and {o.category for o in oracle} == set(bfcl.CATEGORIES)
    assert all(o.success for o in oracle), [(o.task_id, o.details.get("error_message")) for o in oracle if not o.success]
    assert {o.details["protocol"] for o in oracle} == {protocol}
    nothing = _run(plugins, build_client(ModelConfig(name="n", client="no_call"), plugins.registry), protocol=protocol)
    assert not any(o.success for o in nothing)
    assert {o.details["error_type"] for o in nothing} == {"multi_turn:empty_turn_model_response"}
    if protocol == "prompting":  # BFCL's own system prompt carries the function docs; no tools are offered
        first = oracle[0].details["messages"][0]
        assert first["role"] == "system" and first["content"].startswith("You are an expert in composing functions.")
        assert '"name": "ls"' in first["content"]
    else:
        spam = _run(plugins, build_client(ModelConfig(name="s", client="spammer"), plugins.registry), categories=["base"])
        assert not any(o.success for o in spam) and all(o.metrics["calls"] > o.metrics["ground_truth_calls"] for o in spam)


class WrongArgument(OraclePolicy):
    """The oracle with one argument value changed in the last call of the first turn."""

    def begin(self, reference):
        first, *rest = reference.turns
        call = first[-1].attempts[-1]
        args = {k: (v + "_x" if isinstance(v, str) else v) for k, v in call.arguments.items()}
        changed = PolicyTurn(attempts=[*first[-1].attempts[:-1], ToolCall(id=call.id, name=call.name, arguments=args)])
        super().begin(Reference(turns=[[*first[:-1], changed], *rest]))


def test_the_checker_fails_a_wrong_state_and_checks_are_kept_apart(bfcl, plugins):
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    wrong = _run(plugins, WrongArgument(OracleConfig()), categories=["base"])
    assert not all(o.success for o in wrong)
    assert {o.details["error_type"] for o in wrong if not o.success} <= {
        "multi_turn:instance_state_mismatch", "multi_turn:execution_response_mismatch"}
    assert not [k for k in vars(multi_turn_utils) if k.startswith("prove_")]  # checker instances cleared
    again = _run(plugins, OraclePolicy(OracleConfig()), categories=["base"])
    assert all(o.success for o in again)  # the same entries after a failed run: nothing left behind


def test_force_terminated_when_a_turn_runs_past_bfcls_step_limit(bfcl, plugins):
    from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT

    from prove_plugins.eval.bfcl import MAXIMUM_STEP_LIMIT as OURS

    assert OURS == MAXIMUM_STEP_LIMIT
    spammer = build_client(ModelConfig(name="s", client="spammer", options={"turns": 100, "calls_per_turn": 1}),
                           plugins.registry)
    outcome = _run(plugins, spammer, categories=["base"], limit=1)[0]
    assert outcome.details["error_type"] == "multi_turn:force_terminated" and outcome.metrics["steps"] == OURS + 1


def test_calls_run_through_bfcls_executor_and_unsafe_ones_are_not_evaluated(bfcl, tmp_path):
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    from prove_plugins.eval.bfcl import REFUSED_CALL, _Backends, _forget, _unsafe_arithmetic

    entry = bfcl.entries("base")[0]
    calls = ["ls()", "cd(folder='document')", "cd(folder='nowhere')", "mkdir(dir_name='temp')", "pwd()",
             "mv(source='nothing.txt', destination='temp')", "get_user_stats(username='nobody')", "cd(folder=1)",
             "cd()", "lookup(query='x')", "GorillaFileSystem.cd(folder='temp')", "cd(folder=inf)"]
    theirs, _ = execute_multi_turn_func_call(calls, entry["initial_config"], entry["involved_classes"],
                                             "prove_executor_test", entry["id"])
    backends = _Backends(entry, "base", "prove_executor_test_ours")
    try:
        replayed, ours = backends.run(calls)
        assert ours == theirs and replayed == calls  # BFCL's own text, its own errors
        target = tmp_path / "written.txt"
        unsafe = [f"open(file={str(target)!r}, mode='w')", "print(end='x')", "ls().__class__()",
                  "cd(folder=__import__('os').getcwd())", "cd(**{'folder': 'x'})", "cd(folder=[x for x in 'ab'])", "ls()()"]
        replayed, results = backends.run([*unsafe, "pwd()"])
        assert not target.exists() and replayed == [REFUSED_CALL] * len(unsafe) + ["pwd()"]
        assert all(r.startswith("Error during execution: ") and "PROVE does not evaluate" in r for r in results[:-1])
        assert results[-1].startswith('{"current_working_directory": ')  # the safe call beside them ran
    finally:
        _forget("prove_executor_test")
    # BFCL's prompting decoder computes arithmetic in arguments: on number literals only here
    assert not _unsafe_arithmetic("[cd(folder='a'), mean(numbers=[4 + 1, 2 * 3])]")
    assert _unsafe_arithmetic("[cd(folder='a' * 10 ** 9)]") and _unsafe_arithmetic("[f(x=2 ** 99999999)]")
    assert _unsafe_arithmetic("[f(x=__import__('os').getpid() + 1)]")
    assert not _unsafe_arithmetic("[f(x=g(a + b))]")  # BFCL's decoder keeps a call without keywords as text
    # string literals joined by + are what BFCL's decoder computes too; a string built any other way is not
    assert not _unsafe_arithmetic("[cd(folder='doc' + 'ument'), touch(file_name=['a' + \"b\" + 'c'])]")
    assert _unsafe_arithmetic("[f(x='a' * 3)]") and _unsafe_arithmetic("[f(x='a' + str(1))]")


def test_a_failed_request_fails_its_entry_and_the_run_goes_on_with_bfcls_request_settings(bfcl, plugins, endpoint,
                                                                                        tmp_path):
    url, handler = endpoint
    handler.replies = [(400, {"error": "maximum context length exceeded"})] + [(200, message(content="Nothing."))] * 20
    models = [{"name": "m", "client": "openai", "options": {"base_url": url, "retries": 0}}]
    benchmarks = [{"name": "bfcl", "options": {"categories": ["base"], "limit": 2}}]
    experiment = eval_experiment(tmp_path, models=models, benchmarks=benchmarks, plots=False)
    run_evaluation(experiment, plugins, echo=lambda _: None)
    failed, played = outcomes_of(tmp_path / "e" / "eval", "m", "bfcl")
    assert not failed["success"] and failed["details"]["error_type"] == "multi_turn:inference_error"
    assert failed["details"]["request_failed"]["status"] == 400
    assert "maximum context length exceeded" in failed["details"]["error_message"]
    assert played["details"]["error_type"] == "multi_turn:empty_turn_model_response"  # the next entry was played
    first = handler.requests[0]["body"]
    assert first["temperature"] == 0.001 and "max_tokens" not in first  # BFCL's settings for an endpoint
    assert first["tools"] == bfcl.openai_tools(bfcl.entries("base")[0]["function"])
    assert [m["role"] for m in first["messages"]] == ["user"]  # no system prompt in BFCL's FC protocol
    asked = len(handler.requests)
    lines = []
    run_evaluation(experiment, plugins, echo=lines.append)  # resume: a recorded failure counts as done
    assert len(handler.requests) == asked and any("2 from an earlier run" in line for line in lines)

    handler.replies = [(200, message(content="[pwd(x=1)]")), (200, message(content="Done."))] * 10
    models[0]["options"] |= {"temperature": 0.5, "max_tokens": 64}  # the model's options win over BFCL's
    benchmarks = [{"name": "bfcl", "label": "bfcl-prompting",
                   "options": {"categories": ["base"], "ids": ["multi_turn_base_0"], "protocol": "prompting"}}]
    run_evaluation(eval_experiment(tmp_path / "p", models=models, benchmarks=benchmarks, plots=False), plugins,
                   echo=lambda _: None)
    body = handler.requests[asked]["body"]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 64 and "tools" not in body
    assert body["messages"][0]["role"] == "system" and "[func_name1(params_name1=params_value1" in body["messages"][0]["content"]
    (outcome,) = outcomes_of(tmp_path / "p" / "e" / "eval", "m", "bfcl-prompting")
    assert outcome["details"]["protocol"] == "prompting" and outcome["details"]["decoded"][0] == [["pwd(x=1)"]]
    from prove_plugins.train.models.clients import OpenAIConfig, OpenAIPolicy, RequestDefaults, configured

    assert OpenAIPolicy(OpenAIConfig()).settings() == {"temperature": 0.0, "max_tokens": 1024}  # other benchmarks
    assert configured(OpenAIPolicy(OpenAIConfig()), RequestDefaults(seed=3)).settings() == {"temperature": 0.0, "seed": 3}
    tool = outcome["details"]["messages"][3]
    assert tool == {"role": "tool", "name": "pwd(x=1)",
                    "content": "Error during execution: GorillaFileSystem.pwd() got an unexpected keyword argument 'x'"}


def test_ground_truth_calls_parse_positional_arguments_by_signature(bfcl):
    assert bfcl.parse_call("sort('final_report.pdf')", ["GorillaFileSystem"]) == ("sort", {"file_name": "final_report.pdf"})
    assert bfcl.parse_call("cd(folder='a')") == ("cd", {"folder": "a"})
    with pytest.raises(ValueError):
        bfcl.parse_call("x.y(1)")


def test_backends_are_prove_servers_seeded_by_entry(bfcl):
    from prove_core.testing import audit

    fs = bfcl.bfcl_gorilla_file_system
    base = ServerRuntime(fs, seed=0)
    long = ServerRuntime(fs, seed=0, options=bfcl.BfclOptions(category="long_context"))
    assert base.state_hash(base.new_session()) != long.state_hash(long.new_session())
    first = bfcl.entries("base")[0]["initial_config"]["GorillaFileSystem"]["root"]
    listed = base.call("x", "ls", {}).data["current_directory_content"]
    assert sorted(listed) == sorted(next(iter(first.values()))["contents"])
    report = audit(fs)  # examples replay BFCL's ground truth up to each tool's first call
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert fs.tools["ls"].spec.annotations.read_only and not fs.tools["mkdir"].spec.annotations.read_only


def test_benchmark_servers_are_listed_through_the_entry_point_and_can_be_left_out(bfcl, tau2):
    def names(**env):
        proc = subprocess.run([sys.executable, "-m", "prove_core.cli", "plugins", "--json"],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **env})
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert not data["failures"]
        return {c["name"] for c in data["components"] if c["kind"] == "server"}

    listed = names()
    assert {"bfcl_gorilla_file_system", "bfcl_vehicle_control", "tau2_airline", "tau2_mock"} <= listed
    assert not any(n.startswith(("bfcl_", "tau2_")) for n in names(PROVE_BLOCK_PLUGINS="benchmarks"))


def test_benchmark_environments_never_become_distractors(bfcl, tau2):
    """Training material must not show a model a benchmark's tools, and installing an evaluation
    package must not change a corpus: the distractor pool leaves benchmark servers out."""
    from prove_core.plugin.manager import Plugins
    from prove_core.synth.perturbation import PerturbationContext

    full = Plugins().load()  # entry points included: the benchmark servers are registered
    assert {"bfcl_travel_booking", "tau2_airline"} <= set(full.registry.names("servers"))
    assert full.registry.load("servers", "bfcl_travel_booking").benchmark
    assert full.registry.load("servers", "tau2_airline").benchmark
    pool = {server for server, _ in PerturbationContext(full.registry).foreign_tools(["banking"])}
    bundled = {server for server, _ in PerturbationContext(Plugins().load(autoload=False).registry)
               .foreign_tools(["banking"])}
    assert len(bundled) == 19 and bundled <= pool
    assert not any(name.startswith(("bfcl_", "tau2_")) for name in pool), pool


def test_prove_eval_cli_writes_the_report(bfcl, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "prove_core.cli", "eval", "--benchmark", "bfcl", "--model", "oracle",
                           "--model", "no_call", "--limit", "2", "--out", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    cells = report["benchmarks"]["bfcl"]["results"]["all"]
    assert (cells["oracle"]["rate"], cells["oracle"]["n"], cells["no_call"]["rate"]) == (1.0, 8, 0.0)
    assert (tmp_path / "bfcl.png").is_file() and "| **all** | 100.0" in (tmp_path / "report.md").read_text()
    bad = subprocess.run([sys.executable, "-m", "prove_core.cli", "eval", "--benchmark", "bfcl"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.startswith("error: nothing to evaluate")
