"""The ``bfcl`` evaluator: BFCL v4 multi-turn (base, miss_func, miss_param, long_context) from
the ``bfcl-eval`` package, played turn by turn by any model client, scored by BFCL's own checker.

Inference follows BFCL's function-calling loop (``BaseHandler.inference_multi_turn_FC``): the
entry's function docs, converted by BFCL's converter, are offered as tools; each user turn is
followed by model steps until a step makes no call (or more than BFCL's ``MAXIMUM_STEP_LIMIT``
steps, which force-terminates the entry); ``miss_func`` entries gain their held-out functions at
the turn BFCL says, with BFCL's own user message. Calls run on live sessions of the BFCL
servers (``prove_plugins.bfcl_servers``) and the model sees BFCL's rendering of each result.

Scoring is BFCL's: the recorded steps are decoded with BFCL's function-calling decoder
(``convert_to_function_call``) and checked with ``multi_turn_checker``, which replays them and
the ground truth on fresh BFCL instances and compares state and results turn by turn. The two
entry-level checks of BFCL's runner (a force-terminated entry fails; a step that does not
decode is skipped) are applied as it applies them.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.env.rollout import Policy, PolicyTurn
from prove_core.env.runtime import ServerRuntime, ToolResult, build_runtime
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode
from prove_core.model import Message, ToolCall
from prove_plugins.benchmark_servers import BFCL_CATEGORIES
from prove_plugins.wrapped import render_value

MAXIMUM_STEP_LIMIT = 20  # BFCL's (bfcl_eval.constants.default_prompts); checked against it in the tests


def render(result: ToolResult) -> str:
    """A call's result as BFCL's executor shows it to the model."""
    if result.error is None:
        value = render_value(result.data or {})
        return value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict) else str(value)
    if result.error.get("reason") == "BFCL_ERROR":
        return json.dumps({"error": result.error["message"]})
    return f"Error during execution: {result.error['message']}"


def reference_of(ground_truth: list[list[str]], classes: list[str] = ()) -> Reference:
    """BFCL's ground truth as turns: each user turn answered by one step with all its calls."""
    from prove_plugins import bfcl_servers

    turns = []
    for k, calls in enumerate(ground_truth):
        parsed = [bfcl_servers.parse_call(c, classes) for c in calls]
        step = [ToolCall(id=f"gt_{k}_{i}", name=name, arguments=args) for i, (name, args) in enumerate(parsed)]
        turns.append([PolicyTurn(attempts=step)] if step else [])
    return Reference(turns=turns)


@attrs.frozen(kw_only=True)
class BfclConfig:
    categories: list[str] = attrs.field(factory=lambda: list(BFCL_CATEGORIES))
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    ids: list[str] = attrs.field(factory=list)  # only these entries (e.g. "multi_turn_base_12")
    max_steps: int = attrs.field(default=MAXIMUM_STEP_LIMIT, validator=attrs.validators.gt(0))
    transcripts: bool = True

    @categories.validator
    def _check(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(BFCL_CATEGORIES):
            raise ValueError(f"categories must be a non-empty subset of {BFCL_CATEGORIES}")


@attrs.define
class _Episode:
    responses: list[list[list[dict[str, str]]]]  # per turn, per step: [{name: arguments JSON}] (BFCL's FC form)
    messages: list[dict[str, Any]]
    force_quit: bool
    calls: int


class Bfcl:
    """BFCL v4 multi-turn, scored by BFCL's own multi-turn checker."""

    name = "bfcl"
    Config = BfclConfig
    sessions: Any = None  # the experiment's [sessions], set by evaluate (None: defaults)

    def __init__(self, config: BfclConfig) -> None:
        self.config = config

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        from prove_plugins import bfcl_servers

        bfcl_servers.require_bfcl()
        self.sessions = getattr(context.experiment, "sessions", None)
        wanted_ids = set(self.config.ids)
        for category in self.config.categories:
            answers = bfcl_servers.ground_truth(category)
            taken = 0
            for index, entry in enumerate(bfcl_servers.entries(category)):
                if wanted_ids and entry["id"] not in wanted_ids:
                    continue
                if self.config.limit is not None and taken >= self.config.limit:
                    break
                taken += 1
                if not context.wanted(entry["id"]):
                    continue
                truth = answers[entry["id"]]
                begin_episode(policy, reference_of(truth, entry["involved_classes"]))
                episode = self.play(policy, copy.deepcopy(entry), category, index)
                yield self.score(episode, entry, truth, category)

    def play(self, policy: Policy, entry: dict[str, Any], category: str, index: int) -> _Episode:
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

        from prove_plugins import bfcl_servers

        options = bfcl_servers.BfclOptions(category=category)
        routes: dict[str, ServerRuntime] = {}
        runtimes = []
        for class_name in entry["involved_classes"]:
            server = getattr(bfcl_servers, bfcl_servers.CLASS_TO_SERVER[class_name])
            runtime = build_runtime(server, seed=index, options=options, sessions=self.sessions)
            runtimes.append(runtime)
            routes.update({tool: runtime for tool in server.tools})  # a later class wins, as in BFCL
        session = uuid.uuid4().hex
        functions = entry["function"]
        held_out = entry.get("missed_function", {})
        tools = bfcl_servers.openai_tools(functions)
        messages: list[dict[str, Any]] = []
        responses: list[list[list[dict[str, str]]]] = []
        calls_made = 0
        force_quit = False
        for turn_index, question in enumerate(entry["question"]):
            if str(turn_index) in held_out:
                functions.extend(held_out[str(turn_index)])
                tools = bfcl_servers.openai_tools(functions)
                question = [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
            messages.extend(question)
            steps: list[list[dict[str, str]]] = []
            count = 0
            while True:
                turn = policy.respond(messages, tools)
                calls = turn.calls
                undecodable = bool(turn.failures)
                messages.append(Message(role="assistant", content=turn.content or None, tool_calls=calls).to_openai())
                if not calls or undecodable:
                    break  # BFCL: an empty or undecodable response ends the turn
                steps.append([{c.name: json.dumps(c.arguments)} for c in calls])
                for call in calls:
                    runtime = routes.get(call.name)
                    result = (runtime.call(session, call.name, call.arguments) if runtime is not None else
                              ToolResult(error={"code": "UNKNOWN_TOOL", "reason": "UNKNOWN_TOOL",
                                                "message": f"name '{call.name}' is not defined"}))
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": render(result)})
                calls_made += len(calls)
                count += 1
                if count > self.config.max_steps:
                    force_quit = True
                    break
            responses.append(steps)
            if force_quit:
                break
        for runtime in runtimes:
            runtime.close(session)
        return _Episode(responses=responses, messages=messages, force_quit=force_quit, calls=calls_made)

    def score(self, episode: _Episode, entry: dict[str, Any], truth: list[list[str]], category: str) -> Outcome:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
        from bfcl_eval.model_handler.utils import convert_to_function_call

        decoded: list[list[list[str]]] = []
        for turn in episode.responses:
            steps = []
            for step in turn:
                try:
                    calls = convert_to_function_call(step)
                except Exception:  # BFCL's runner skips a step it cannot decode
                    continue
                if calls:
                    steps.append(calls)
            decoded.append(steps)
        if episode.force_quit or len(decoded) != len(truth):
            verdict: dict[str, Any] = {"valid": False, "error_type": "multi_turn:force_terminated",
                                       "error_message": f"more than {self.config.max_steps} steps in one turn"}
        else:
            # The checker keeps BFCL instances in a module-level dict keyed by model name and entry
            # id; a name of our own per check keeps checks apart, and is cleared afterwards.
            checker_name = f"prove_{uuid.uuid4().hex}"
            try:
                verdict = multi_turn_checker(decoded, truth, copy.deepcopy(entry), f"multi_turn_{category}", checker_name)
            finally:
                space = vars(multi_turn_utils)
                for key in [k for k in space if k.startswith(checker_name)]:
                    del space[key]
        details: dict[str, Any] = {"decoded": decoded}
        if not verdict["valid"]:
            details["error_type"] = verdict.get("error_type")
            details["error_message"] = verdict.get("error_message")
        if self.config.transcripts:
            details["messages"] = episode.messages
        steps = sum(len(t) for t in episode.responses)
        return Outcome(task_id=entry["id"], category=category, success=bool(verdict["valid"]),
                       metrics={"calls": float(episode.calls), "steps": float(steps),
                                "ground_truth_calls": float(sum(len(t) for t in truth))},
                       details=details)


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(Bfcl)
