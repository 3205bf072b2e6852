"""τ² fidelity: PROVE's ``tau2`` evaluator against τ²'s own run path, policy by policy, task by task.

Both sides play the same deterministic, imperfect "models": a scripted **agent model** (a
function of the messages and tools it is sent, e.g. the golden actions followed by 30 reads) and
a scripted **user model** (the customer: opens, then stops, transfers or never stops). Only the
models are stand-ins; everything around them is each side's own code:

- **PROVE**: ``prove eval``'s evaluator (``prove_plugins.eval.tau2.Tau2``) with the ``openai``
  client and the ``llm`` user simulator, both talking to the scripted models over HTTP on
  127.0.0.1, tool calls on live sessions of the ``tau2_<domain>`` PROVE servers;
- **τ²**: ``tau2.run.run_tasks`` (what ``tau2 run`` calls) with τ²'s ``LLMAgent`` and
  ``UserSimulator``, its ``Orchestrator``, environment and evaluator; the scripted models answer in
  place of litellm's ``completion`` (``tau2.utils.llm_utils.completion``).

Per task, the reward, the termination reason, every prompt each model was sent (messages, tools)
and the request settings (temperature, seed) must be the same on both sides. The scripted user of
``user.client = "scripted"`` (a subclass of τ²'s ``UserSimulator``) is checked the same way, as a
user registered in τ²'s registry.

    python benchmarks/bench_tau2_fidelity.py                       # every scenario, every task of mock and retail (1-2 h)
    python benchmarks/bench_tau2_fidelity.py --domains airline --scenarios golden unknown_tool
    python benchmarks/bench_tau2_fidelity.py --quick               # a smoke run

Prints one row per scenario and domain (tasks, pass rate on each side, agreement) and exits 1 on
any disagreement. ``tests/eval/test_tau2_fidelity.py`` runs the same harness on a few tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

AGENT_MODEL, USER_MODEL = "scripted-agent", "scripted-user"
MODEL_ENTRY = "scripted"  # the [[eval.models]] name
OPENING = "Hi, I need help with my request."
READS = {"mock": ("get_users", {}), "retail": ("list_all_product_types", {}), "airline": ("list_all_airports", {})}
UNKNOWN = "lookup_everything"


# -- the scripted models -------------------------------------------------------------------------------


def golden_actions(task: Any) -> list[tuple[str, dict[str, Any]]]:
    criteria = task.evaluation_criteria
    actions = (criteria.actions or []) if criteria is not None else []
    return [(a.name, dict(a.arguments)) for a in actions if a.requestor == "assistant"]


def closing(task: Any) -> str:
    criteria = task.evaluation_criteria
    info = (criteria.communicate_info or []) if criteria is not None else []
    return ("Here is what I found: " + "; ".join(str(x) for x in info) + ".") if info else "Your request is done."


def call(*calls: tuple[str, Any], content: str | None = None) -> dict[str, Any]:
    """An assistant message making ``calls`` ((name, arguments); arguments that are a string are
    sent as they are, so they may be broken JSON). Ids are filled in when it is sent."""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for name, args in calls]}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _wrong(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: (f"nonexistent_{v}" if isinstance(v, str) else v) for k, v in arguments.items()}


@attrs.frozen(kw_only=True)
class Scenario:
    """A scripted agent (``moves(task, domain)``: its messages in order, then ``tail(task, domain)``
    forever), a scripted user (``once``: opens, then stops after the agent's first answer in prose;
    ``transfer``: opens, then asks for a human; ``never``: opens, then keeps asking; ``scripted``:
    PROVE's scripted user, on both sides), and the limits (``max_steps(task)`` or None: the
    evaluator's default; ``max_errors``)."""

    name: str
    moves: Callable[[Any, str], list[dict[str, Any]]]
    tail: Callable[[Any, str], dict[str, Any]] = lambda task, domain: say(closing(task))
    user: str = "once"
    max_steps: Callable[[Any], int] | None = None
    max_errors: int | None = None
    about: str = ""


def _golden(task: Any, domain: str) -> list[dict[str, Any]]:
    return [call(action) for action in golden_actions(task)]


def _floats(value: Any) -> Any:
    """Every whole number as a float (``50`` -> ``50.0``, as models often write them)."""
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _first_text(arguments: dict[str, Any], change: Callable[[str], Any]) -> dict[str, Any]:
    """``arguments`` with its first text value changed (all of them as they are when none is text)."""
    key = next((k for k, v in arguments.items() if isinstance(v, str)), None)
    return arguments if key is None else {**arguments, key: change(arguments[key])}


def _as_number(arguments: dict[str, Any], number: float) -> str:
    """``arguments`` as JSON text with ``number`` (NaN, Infinity) for the first text value."""
    return json.dumps(_first_text(arguments, lambda v: number))


def _first_changed(task: Any, change: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """The golden calls with the first one's arguments changed, then the closing message."""
    return [call((a[0], change(a[1]))) if i == 0 else call(a) for i, a in enumerate(golden_actions(task))] \
        + [say(closing(task))]


SCENARIOS = [
    Scenario(name="golden", moves=lambda t, d: [*_golden(t, d), say(closing(t))], about="the golden actions, one per message"),
    Scenario(name="golden_scripted_user", moves=lambda t, d: [*_golden(t, d), say(closing(t))], user="scripted",
             about="the same with PROVE's scripted user (registered in τ²)"),
    Scenario(name="golden_parallel", moves=lambda t, d: [*([call(*golden_actions(t))] if golden_actions(t) else []),
                                                         say(closing(t))],
             about="every golden call in one message (one environment step)"),
    Scenario(name="golden_with_text", moves=lambda t, d: [call(a, content="Let me do that.") for a in golden_actions(t)]
             + [say(closing(t))], about="text and a call in each message"),
    Scenario(name="golden_then_3_reads", moves=lambda t, d: [*_golden(t, d), *[call(READS[d])] * 3, say(closing(t))],
             about="a few extra reads"),
    Scenario(name="golden_then_30_reads", moves=lambda t, d: [*_golden(t, d), *[call(READS[d])] * 30, say(closing(t))],
             max_steps=lambda t: 40, about="the audit's case: under 40 agent turns, over 40 steps"),
    Scenario(name="unknown_tool", moves=lambda t, d: [*_golden(t, d), call((UNKNOWN, {})), say(closing(t))],
             about="the audit's case: a call of a tool that does not exist"),
    Scenario(name="unknown_tool_max_errors_1", moves=lambda t, d: [call((UNKNOWN, {})), *_golden(t, d), say(closing(t))],
             max_errors=1, about="one failed call with max_errors 1"),
    Scenario(name="missing_args", moves=lambda t, d: [call((a[0], {})) if i == 0 else call(a)
                                                      for i, a in enumerate(golden_actions(t))] + [say(closing(t))],
             about="the first golden call without its arguments"),
    Scenario(name="wrong_values", moves=lambda t, d: [call((a[0], _wrong(a[1]))) if i == 0 else call(a)
                                                      for i, a in enumerate(golden_actions(t))] + [say(closing(t))],
             about="the first golden call with wrong ids"),
    Scenario(name="early_stop", moves=lambda t, d: [say(closing(t))], about="answers at once, no call"),
    Scenario(name="agent_says_stop", moves=lambda t, d: [say("###STOP###"), *_golden(t, d), say(closing(t))],
             about="###STOP### from the agent is prose for τ²'s LLMAgent"),
    Scenario(name="read_loop", moves=lambda t, d: [], tail=lambda t, d: call(READS[d]), max_steps=lambda t: 30,
             about="reads forever: max_steps"),
    Scenario(name="error_loop", moves=lambda t, d: [], tail=lambda t, d: call((UNKNOWN, {})),
             about="unknown tool forever: max_errors"),
    Scenario(name="prose_loop", moves=lambda t, d: [], tail=lambda t, d: say("Could you say more?"), user="never",
             max_steps=lambda t: 20, about="prose only, the user never stops: max_steps"),
    Scenario(name="transfer", moves=lambda t, d: [*_golden(t, d), say(closing(t))], user="transfer",
             about="the user asks for a human (###TRANSFER###)"),
    Scenario(name="stop_at_max_steps", moves=lambda t, d: [*_golden(t, d), say(closing(t))],
             max_steps=lambda t: 2 * len(golden_actions(t)) + 3,
             about="the user's stop is step max_steps: τ² reports max_steps"),
    Scenario(name="empty_message", moves=lambda t, d: [say("")], about="an empty answer (asked again, then fails)"),
    Scenario(name="broken_json", moves=lambda t, d: [call(("get_users", "{oops"))], about="arguments that are not JSON"),
    Scenario(name="whole_floats", moves=lambda t, d: [call((a[0], _floats(a[1]))) for a in golden_actions(t)]
             + [say(closing(t))], about="the golden calls with every whole number written as a float (50.0)"),
    Scenario(name="empty_arguments", moves=lambda t, d: _first_changed(t, lambda a: ""),
             about="the first golden call with arguments \"\" (τ²'s json.loads fails the run)"),
    Scenario(name="non_finite", moves=lambda t, d: _first_changed(t, lambda a: _as_number(a, float("nan"))),
             about="the first golden call with a NaN for its first text value"),
    Scenario(name="infinity", moves=lambda t, d: _first_changed(t, lambda a: _as_number(a, float("inf"))),
             about="the first golden call with Infinity for its first text value"),
    Scenario(name="lone_surrogate", moves=lambda t, d: _first_changed(t, lambda a: _first_text(a, lambda v: v + "\ud800")),
             about="the first golden call's first text value ending in a lone surrogate"),
    Scenario(name="padded_text", moves=lambda t, d: [call(a, content="  Let me do that.\n") for a in golden_actions(t)]
             + [say("\n  " + closing(t) + "  \n")], about="text with whitespace around it, kept as written"),
]
QUICK = ("golden", "golden_then_30_reads", "unknown_tool", "empty_message")


class ScriptedModels:
    """The agent and user models of one scenario and task, answering requests from both sides;
    ``log[side]`` records every request as (model, messages, tools, settings)."""

    def __init__(self) -> None:
        self.scenario: Scenario | None = None
        self.task: Any = None
        self.domain = ""
        self.log: dict[str, list[dict[str, Any]]] = {"prove": [], "tau2": []}

    def play(self, scenario: Scenario, domain: str, task: Any) -> None:
        self.scenario, self.domain, self.task = scenario, domain, task
        self.log = {"prove": [], "tau2": []}

    def _history(self, cls: str) -> int:
        initial = self.task.initial_state
        return sum(1 for m in (initial.message_history or [] if initial is not None else []) if type(m).__name__ == cls)

    def answer(self, side: str, model: str, messages: list[dict[str, Any]], tools: Any, settings: dict[str, Any]) -> dict:
        messages = normal(messages)
        self.log[side].append({"model": model, "messages": messages, "tools": tools or None, "settings": settings})
        assert self.scenario is not None
        if model == USER_MODEL:  # the user's own earlier messages are "assistant" in its flipped view
            said = sum(1 for m in messages if m["role"] == "assistant") - self._history("UserMessage")
            if said == 0:
                return say(OPENING)
            return say({"once": "Thanks, that's all. ###STOP###", "transfer": "I want a human agent. ###TRANSFER###",
                        "never": "Please go on."}[self.scenario.user])
        start = self._history("AssistantMessage") or 1  # the greeting
        position = sum(1 for m in messages if m["role"] == "assistant") - start
        moves = self.scenario.moves(self.task, self.domain)
        move = moves[position] if position < len(moves) else self.scenario.tail(self.task, self.domain)
        move = json.loads(json.dumps(move))
        for i, tool_call in enumerate(move.get("tool_calls") or []):
            tool_call["id"] = f"call_{position}_{i}"
        return move


def normal(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as JSON, without ``tool_calls: null``."""
    out = json.loads(json.dumps(messages))
    for m in out:
        if m.get("tool_calls", ...) is None:
            del m["tool_calls"]
    return out


class _Handler(BaseHTTPRequestHandler):
    models: ScriptedModels

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        settings = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
        message = self.models.answer("prove", body["model"], body["messages"], body.get("tools"), settings)
        data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(models: ScriptedModels) -> Iterator[str]:
    """The scripted models behind an OpenAI-compatible endpoint on 127.0.0.1 (PROVE's side)."""
    handler = type("Handler", (_Handler,), {"models": models})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def in_place_of_litellm(models: ScriptedModels) -> Iterator[None]:
    """The scripted models in place of litellm's ``completion`` in τ²'s ``generate`` (τ²'s side)."""
    from litellm import ModelResponse
    from tau2.utils import llm_utils

    def completion(model: str, messages: list[dict[str, Any]], tools: Any = None, tool_choice: Any = None,
                   **kwargs: Any) -> Any:
        settings = {k: v for k, v in kwargs.items() if v is not None}
        message = models.answer("tau2", model, messages, tools, settings)
        return ModelResponse(model=model, choices=[{"index": 0, "finish_reason": "stop", "message": message}])

    original = llm_utils.completion
    llm_utils.completion = completion
    try:
        yield
    finally:
        llm_utils.completion = original


# -- the two sides -------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Result:
    reward: float
    termination: str


@attrs.frozen(kw_only=True)
class Compared:
    scenario: str
    domain: str
    task: str
    prove: Result
    tau2: Result
    problems: tuple[str, ...]

    @property
    def agree(self) -> bool:
        return not self.problems


class Harness:
    """Plays scenarios on both sides. Use as a context manager (it serves the models over HTTP
    and stands them in for litellm)."""

    def __init__(self) -> None:
        from prove_core.plugin.manager import Plugins
        from prove_plugins.eval.servers import tau2 as tau2_servers

        tau2_servers.require_tau2()
        self.models = ScriptedModels()
        self.plugins = Plugins().load(autoload=False)
        self._stack = contextlib.ExitStack()
        self.url = ""

    def __enter__(self) -> Harness:
        from tau2.registry import registry

        from prove_core.config import load_experiment
        from prove_plugins.eval.tau2 import user_classes

        self.url = self._stack.enter_context(serve(self.models))
        self._stack.enter_context(in_place_of_litellm(self.models))
        tmp = self._stack.enter_context(tempfile.TemporaryDirectory())
        self.experiment = load_experiment({
            "name": "fidelity", "output_dir": tmp, "servers": [{"name": "banking"}],
            "eval": {"models": [{"name": MODEL_ENTRY, "client": "openai",
                                 "options": {"base_url": self.url, "model": AGENT_MODEL}}],
                     "benchmarks": [{"name": "tau2"}]}})
        self.out_dir = Path(tmp)
        if "prove_scripted" not in registry.get_users():
            registry.register_user(user_classes()[0], "prove_scripted")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def prove(self, scenario: Scenario, domain: str, task: Any) -> Result:
        from prove_core.eval.core import EvalContext, build_client
        from prove_plugins.eval.tau2 import Tau2, Tau2Config, UserConfig

        user = UserConfig(client="scripted") if scenario.user == "scripted" else UserConfig(base_url=self.url, model=USER_MODEL)
        limits = {k: v for k, v in (("max_steps", scenario.max_steps(task) if scenario.max_steps else None),
                                    ("max_errors", scenario.max_errors)) if v is not None}
        config = Tau2Config(domains=[domain], task_ids=[str(task.id)], user=user, transcripts=False, **limits)
        context = EvalContext(registry=self.plugins.registry, experiment=self.experiment, out_dir=self.out_dir,
                              model=MODEL_ENTRY)
        policy = build_client(self.experiment.eval.models[0], self.plugins.registry)
        (outcome,) = list(Tau2(config).evaluate(policy, context))
        return Result(reward=float(outcome.score or 0.0), termination=outcome.details["termination"])

    def tau2(self, scenario: Scenario, domain: str, task: Any) -> Result:
        """``tau2.run.run_tasks``, as ``tau2 run`` calls it (run_domain: τ²'s agent/user defaults,
        its retries; failed samples scored 0), for one task."""
        from loguru import logger
        from tau2.config import (
            DEFAULT_LLM_ARGS_AGENT,
            DEFAULT_LLM_ARGS_USER,
            DEFAULT_MAX_ERRORS,
            DEFAULT_MAX_RETRIES,
            DEFAULT_MAX_STEPS,
            DEFAULT_SEED,
        )
        from tau2.data_model.simulation import TerminationReason
        from tau2.evaluator.evaluator import EvaluationType
        from tau2.run import run_tasks

        scripted = scenario.user == "scripted"
        with contextlib.redirect_stdout(io.StringIO()):
            results = run_tasks(
                domain=domain, tasks=[task], agent="llm_agent", user="prove_scripted" if scripted else "user_simulator",
                llm_agent=AGENT_MODEL, llm_args_agent={**DEFAULT_LLM_ARGS_AGENT, "num_retries": DEFAULT_MAX_RETRIES},
                llm_user=None if scripted else USER_MODEL,
                llm_args_user={**DEFAULT_LLM_ARGS_USER, "num_retries": DEFAULT_MAX_RETRIES},
                max_steps=scenario.max_steps(task) if scenario.max_steps else DEFAULT_MAX_STEPS,
                max_errors=scenario.max_errors or DEFAULT_MAX_ERRORS, save_to=None, console_display=False,
                evaluation_type=EvaluationType.ALL, max_concurrency=1, skip_failed_samples=True, seed=DEFAULT_SEED,
                log_level="CRITICAL")
        logger.remove()  # run_tasks replaced loguru's handlers; give back the default one
        logger.add(sys.stderr)
        (simulation,) = results.simulations
        return Result(reward=float(simulation.reward_info.reward),
                      termination=TerminationReason(simulation.termination_reason).value)

    def compare(self, scenario: Scenario, domain: str, task: Any) -> Compared:
        self.models.play(scenario, domain, task)
        ours = self.prove(scenario, domain, task)
        theirs = self.tau2(scenario, domain, task)
        problems = []
        if ours.reward != theirs.reward:
            problems.append(f"reward {ours.reward} != τ²'s {theirs.reward}")
        if ours.termination != theirs.termination:
            problems.append(f"termination {ours.termination} != τ²'s {theirs.termination}")
        problems += prompt_differences(self.models.log["prove"], self.models.log["tau2"])
        return Compared(scenario=scenario.name, domain=domain, task=str(task.id), prove=ours, tau2=theirs,
                        problems=tuple(problems))


def compared_settings(model: str) -> tuple[str, ...]:
    """The request settings compared: temperature and max_tokens; the seed for the user, and for
    the agent when the model clients can take one from a benchmark (``RequestDefaults.seed``)."""
    from prove_plugins.train.models.clients import RequestDefaults

    seeded = model == USER_MODEL or "seed" in attrs.fields_dict(RequestDefaults)
    return ("temperature", "max_tokens", *(("seed",) if seeded else ()))


def prompt_differences(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[str]:
    """What the models were sent differently: the requests in order (model, messages, tools) and
    the settings (``compared_settings``)."""
    if len(ours) != len(theirs):
        return [f"{len(ours)} model requests != τ²'s {len(theirs)}"]
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for key in ("model", "messages", "tools"):
            if a[key] != b[key]:
                return [f"request {i} ({a['model']}): {key} differ"]
        for key in compared_settings(a["model"]):
            if a["settings"].get(key) != b["settings"].get(key):
                return [f"request {i} ({a['model']}): {key} {a['settings'].get(key)!r} != τ²'s {b['settings'].get(key)!r}"]
    return []


def run(scenarios: list[Scenario], domains: list[str], limit: int | None, task_ids: list[str] | None = None,
        echo: Callable[[str], None] = print) -> list[Compared]:
    from prove_plugins.eval.servers import tau2 as tau2_servers

    out = []
    with Harness() as harness:
        for domain in domains:
            tasks = [t for t in tau2_servers.tasks(domain) if not task_ids or str(t.id) in task_ids][:limit]
            for scenario in scenarios:
                started = time.perf_counter()
                rows = [harness.compare(scenario, domain, task) for task in tasks]
                out += rows
                echo(row_line(scenario.name, domain, rows, time.perf_counter() - started))
    return out


def row_line(scenario: str, domain: str, rows: list[Compared], seconds: float) -> str:
    n = len(rows)
    ours = sum(r.prove.reward >= 1.0 for r in rows)
    theirs = sum(r.tau2.reward >= 1.0 for r in rows)
    agree = sum(r.agree for r in rows)
    ends = sorted({r.tau2.termination for r in rows})
    return (f"| {scenario} | {domain} | {n} | {ours}/{n} | {theirs}/{n} | {agree}/{n} | {', '.join(ends)} "
            f"| {seconds:.1f} |")


HEADER = ("| scenario | domain | tasks | PROVE passed | τ² passed | identical | τ² termination | seconds |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", nargs="+", default=["mock", "retail"])
    parser.add_argument("--scenarios", nargs="+", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--limit", type=int, default=None, help="tasks per domain")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 scenarios, mock, 3 tasks")
    args = parser.parse_args(argv)
    names = args.scenarios or (QUICK if args.quick else [s.name for s in SCENARIOS])
    scenarios = [s for s in SCENARIOS if s.name in names]
    domains = ["mock"] if args.quick else args.domains
    limit = 3 if args.quick else args.limit
    from prove_core.logging import configure

    configure(level="warning")
    print(HEADER)
    started = time.perf_counter()
    rows = run(scenarios, domains, limit)
    bad = [r for r in rows if not r.agree]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} task runs identical on both sides ({time.perf_counter() - started:.0f} s)")
    for r in bad:
        print(f"  DIFFERENT {r.scenario} {r.domain}/{r.task}: {'; '.join(r.problems)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
