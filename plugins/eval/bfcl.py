"""The ``bfcl`` evaluator: BFCL v4 multi-turn (base, miss_func, miss_param, long_context) from the
``bfcl-eval`` package, played with any model client the way BFCL's own generation pipeline plays
an entry, and scored the way BFCL's own evaluation runner scores it (docs/evaluation.md).

Two protocols, as BFCL runs models (option ``protocol``):

- ``fc`` — BFCL's function-calling loop (``BaseHandler.inference_multi_turn_FC``) as its OpenAI
  handler (``OpenAICompletionsHandler``, ``is_fc_model``) runs it: no system prompt; the entry's
  function docs, converted by BFCL's ``convert_to_tool``, are the tools; a reply is read as that
  handler reads it — ``[{name: arguments text}]`` from its tool calls, else its text — and decoded
  by BFCL's ``convert_to_function_call``; each result goes back as a ``tool`` message answering
  the call's id.
- ``prompting`` — BFCL's prompting loop (``inference_multi_turn_prompting``) as its handler for
  local checkpoints (``OSSHandler``) runs it: BFCL's system prompt with the function docs
  (``system_prompt_pre_processing_chat_model``), no tools; the reply's text is decoded by BFCL's
  ``default_decode_execute_prompting``; each result goes back as a ``tool`` message named by the
  call.

In both, after each user turn the model takes steps: a reply that does not decode, or decodes to
no call (``is_empty_execute_response``), ends the turn; decoded calls run through BFCL's
``execute_multi_turn_func_call`` on BFCL's own instances — its eval of the call string, its
rendering of each result — and after more than ``MAXIMUM_STEP_LIMIT`` (20) executed steps in one
turn the entry is force-quit. ``miss_func`` entries gain their held-out functions as BFCL's
handlers add them (``fc``: the tools grow, BFCL's user message; ``prompting``: BFCL's user message
listing them, the system prompt unchanged).

Scoring is that of BFCL's runner (``_evaluate_single_multi_turn_entry``): an entry with fewer turns
played than its ground truth has (force-quit before its last turn) fails as ``force_terminated``;
otherwise the steps that decoded to calls go to ``multi_turn_checker``. A model request that fails
for good (``RequestFailed``) fails the entry as BFCL's ``inference_error`` and the run goes on.

One safeguard departs from BFCL: BFCL evaluates call strings built from the model's text with
Python's ``eval`` (and its prompting decoder evaluates arithmetic in arguments). A call whose
function is a Python builtin or a name of BFCL's executor module (``open``, ``print``, ...), an
attribute of a call's result, or an argument that is an expression rather than a literal (other
than arithmetic on number literals and ``+`` of string literals, which BFCL's decoder computes), is not
evaluated here: the model sees ``Error during execution: ...`` saying so, and the checker replays a
call that fails the same way. A model calling the backends' functions never meets it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import json
import uuid
from collections.abc import Iterator
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.errors import RequestFailed
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode, category_rates
from prove_core.model import Message, ToolCall
from prove_core.reward.rollout import Policy, PolicyTurn
from prove_plugins.eval.servers import BFCL_CATEGORIES
from prove_plugins.train.models.clients import RequestDefaults, configured

MAXIMUM_STEP_LIMIT = 20  # BFCL's (bfcl_eval.constants.default_prompts); checked against it in the tests
PROTOCOLS = ("fc", "prompting")
BFCL_TEMPERATURE = 0.001  # `bfcl generate --temperature` default (bfcl_eval/__main__.py, _llm_response_generation.py)
BFCL_MAX_TOKENS_CAP = 4096  # OSSHandler._query_prompting: min(4096, context - prompt - 2) for local models
REFUSED_CALL = "prove_refused_call()"  # what the checker replays for a call the safeguard did not evaluate


def request_defaults(protocol: str) -> RequestDefaults:
    """BFCL's request settings: temperature 0.001; no max_tokens for an endpoint (BFCL's API handlers
    send none), what the context leaves up to 4,096 for a local checkpoint; prompting: text only."""
    return RequestDefaults(temperature=BFCL_TEMPERATURE, max_tokens=None, cap=BFCL_MAX_TOKENS_CAP,
                           text_only=protocol == "prompting")


def reference_of(ground_truth: list[list[str]], classes: list[str] = ()) -> Reference:
    """BFCL's ground truth as turns: each user turn answered by one step with all its calls."""
    from prove_plugins.eval.servers import bfcl as bfcl_servers

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
    protocol: str = attrs.field(default="fc", validator=attrs.validators.in_(PROTOCOLS))
    max_steps: int = attrs.field(default=MAXIMUM_STEP_LIMIT, validator=attrs.validators.gt(0))  # BFCL's: 20
    transcripts: bool = True

    @categories.validator
    def _check(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(BFCL_CATEGORIES):
            raise ValueError(f"categories must be a non-empty subset of {BFCL_CATEGORIES}")


# -- one step: a reply read and decoded as BFCL's handler reads and decodes it ---------------------


@attrs.frozen(kw_only=True)
class _Step:
    responses: Any  # BFCL's model_responses: fc [{name: arguments text}] or the reply's text
    message: dict[str, Any]  # the assistant message the chat history gains
    calls: list[str] | None  # BFCL's decoded calls; None: the reply does not decode
    ids: list[Any] = attrs.field(factory=list)  # fc: the tool-call ids the results answer
    error: str = ""  # why it did not decode


def _fc_step(turn: PolicyTurn) -> _Step:
    """``OpenAICompletionsHandler._parse_query_response_FC`` and ``decode_execute`` (FC)."""
    from bfcl_eval.model_handler.utils import convert_to_function_call

    message = getattr(turn, "message", None)
    if isinstance(message, dict) and message:  # the chat-completion message as the endpoint sent it
        history = message
        try:
            calls = message["tool_calls"]
            responses: Any = [{c["function"]["name"]: c["function"]["arguments"]} for c in calls]
            ids = [c.get("id") for c in calls]
        except (KeyError, TypeError, AttributeError):  # no tool calls: the reply's text, as BFCL falls back to it
            responses, ids = message.get("content"), []
    else:  # a policy that hands over parsed calls (a local checkpoint's parser, a scripted baseline)
        history = Message(role="assistant", content=turn.content or None, tool_calls=turn.calls).to_openai()
        responses = [{c.name: json.dumps(c.arguments)} for c in turn.calls] if turn.attempts else turn.content
        ids = [c.id for c in turn.calls]
        if turn.failures:  # a call the client could not read: the step does not decode
            return _Step(responses=[*responses, *({"<unparsed>": f.text} for f in turn.failures)], message=history,
                         calls=None, error="; ".join(f.message for f in turn.failures))
    try:
        decoded = convert_to_function_call(responses)
    except Exception as exc:  # noqa: BLE001 - BFCL: "Failed to decode the model response. Proceed to next turn."
        why = "a text reply, no tool call" if not isinstance(responses, list) else f"{type(exc).__name__}: {exc}"
        return _Step(responses=responses, message=history, calls=None, error=why)
    return _Step(responses=responses, message=history, calls=decoded, ids=ids)


def _reply_text(turn: PolicyTurn) -> str:
    """The text of a reply under the prompting protocol: the message's content, the generated
    text, or — for a policy that hands over parsed calls — those calls written as BFCL's prompt asks."""
    message = getattr(turn, "message", None)
    if isinstance(message, dict) and message:
        content = message.get("content")
        return content if isinstance(content, str) else ""
    if turn.raw:
        return turn.raw
    if turn.calls:
        return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})"
                               for c in turn.calls) + "]"
    return turn.content


def _prompting_step(turn: PolicyTurn) -> _Step:
    """``OSSHandler._parse_query_response_prompting`` and ``decode_execute``."""
    from bfcl_eval.model_handler.utils import default_decode_execute_prompting

    text = _reply_text(turn)
    history = {"role": "assistant", "content": text}
    unsafe = _unsafe_arithmetic(text)
    if unsafe:
        return _Step(responses=text, message=history, calls=None, error=unsafe)
    try:
        decoded = default_decode_execute_prompting(text, has_tool_call_tag=False)
    except Exception as exc:  # noqa: BLE001 - BFCL: "Failed to decode the model response. Proceed to next turn."
        return _Step(responses=text, message=history, calls=None, error=f"{type(exc).__name__}: {exc}")
    return _Step(responses=text, message=history, calls=decoded)


# -- the safeguard (the one departure from BFCL; see the module docstring) --------------------------


_LITERALS = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.unaryop,
             ast.keyword, ast.expr_context)


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def refusal(call: str, methods: frozenset[str], forbidden: frozenset[str]) -> str | None:
    """Why BFCL's executor must not evaluate ``call`` (``None``: it may, and it does what BFCL does).
    ``methods``: the backends' public methods (BFCL routes these names to its instances);
    ``forbidden``: names the executor's ``eval`` would find otherwise (its module's, builtins)."""
    try:
        tree = ast.parse(call, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # BFCL's eval fails on it the same way: nothing runs
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in methods and node.id in forbidden:
                return f"{node.id!r} is not a function of this entry's backends (PROVE does not evaluate it)"
        elif isinstance(node, ast.Attribute):
            root = _root(node)
            if not isinstance(root, ast.Name) or root.id in methods:
                return "PROVE does not evaluate an attribute of a value"
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name | ast.Attribute):
                return "PROVE does not evaluate a call of a computed value"
            if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
                return "PROVE does not evaluate unpacked arguments"
        elif not isinstance(node, _LITERALS):
            return f"PROVE does not evaluate a {type(node).__name__} expression in a call"
    return None


def _computed(node: ast.expr) -> Iterator[ast.BinOp]:
    """The ``BinOp``s BFCL's prompting decoder evaluates in a call (``resolve_ast_call`` /
    ``resolve_ast_by_type``): those in keyword values, through lists, tuples, dicts and nested calls
    that have keywords (a nested call without keywords becomes its source text)."""
    if isinstance(node, ast.Call):
        for keyword in node.keywords:
            yield from _computed(keyword.value)
    elif isinstance(node, ast.List | ast.Tuple):
        for element in node.elts:
            yield from _computed(element)
    elif isinstance(node, ast.Dict):
        for part in (*node.keys, *node.values):
            if part is not None:
                yield from _computed(part)
    elif isinstance(node, ast.BinOp):
        yield node


def _string_concatenation(node: ast.BinOp) -> bool | None:
    """``True`` when ``node`` joins string literals with ``+`` only (``'doc' + 'ument'``: its result
    is no longer than the text it came from), ``False`` when it holds a string with anything else
    (``'a' * 10 ** 9``), ``None`` when it holds no string."""
    leaves = [n for n in ast.walk(node) if isinstance(n, ast.Constant)]
    if not any(isinstance(leaf.value, str) for leaf in leaves):
        return None
    return all(isinstance(n, ast.BinOp | ast.Add) or (isinstance(n, ast.Constant) and isinstance(n.value, str))
               for n in ast.walk(node))


def _unsafe_arithmetic(text: str) -> str:
    """BFCL's prompting decoder evaluates arithmetic it finds in arguments (``resolve_ast_by_type``
    runs ``eval`` on a ``BinOp``); PROVE lets it do so on number literals, and on string literals
    joined by ``+``, only."""
    body = text.strip("`\n ")
    body = ("" if body.startswith("[") else "[") + body + ("" if body.endswith("]") else "]")
    try:
        tree = ast.parse(body.strip().strip("'"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""  # the decoder fails on it the same way
    top = tree.body.elts if isinstance(tree.body, ast.List | ast.Tuple) else [tree.body]
    for node in (op for element in top if isinstance(element, ast.Call) for op in _computed(element)):
        joined = _string_concatenation(node)
        if joined is not None:
            if not joined:
                return "PROVE does not evaluate a string argument computed with anything but + of string literals"
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow | ast.LShift):
                exponent = inner.right
                if not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, int) and abs(exponent.value) <= 64):
                    return "PROVE does not evaluate a power or shift by more than 64 in an argument"
            elif not (isinstance(inner, ast.BinOp | ast.UnaryOp | ast.operator | ast.unaryop)
                      or (isinstance(inner, ast.Constant) and type(inner.value) in (int, float))):
                return "PROVE does not evaluate an argument computed from anything but numbers"
    return ""


# -- BFCL's backends, through BFCL's executor -----------------------------------------------------


class _Backends:
    """The entry's BFCL instances, kept by BFCL's executor in its module under ``name``."""

    def __init__(self, entry: dict[str, Any], category: str, name: str) -> None:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

        self.execute = multi_turn_utils.execute_multi_turn_func_call
        self.options = {"initial_config": entry.get("initial_config", {}), "involved_classes": entry["involved_classes"],
                        "model_name": name, "test_entry_id": entry["id"], "long_context": category == "long_context",
                        "is_evaL_run": False}
        _, instances = self.execute([], **self.options)  # as BFCL's handler does before the first turn
        self.methods = frozenset(method for instance in instances.values()
                                 for method, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
                                 if not method.startswith("_"))
        self.forbidden = frozenset(vars(multi_turn_utils)) | frozenset(dir(builtins))

    def run(self, calls: list[str]) -> tuple[list[str], list[str]]:
        """(the calls as the checker will replay them, the results the model reads)."""
        reasons = [refusal(c, self.methods, self.forbidden) for c in calls]
        if not any(reasons):
            return list(calls), self.execute(calls, **self.options)[0]
        results = [f"Error during execution: {reason}" if reason else self.execute([call], **self.options)[0][0]
                   for call, reason in zip(calls, reasons)]
        return [REFUSED_CALL if reason else call for call, reason in zip(calls, reasons)], results


def _forget(name: str) -> None:
    """Drop the instances BFCL's executor keeps for ``name`` (inference, the checker's replays)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    space = vars(multi_turn_utils)
    for key in [k for k in space if k.startswith(f"{name}_")]:
        del space[key]


# -- the evaluator --------------------------------------------------------------------------------


@attrs.define
class _Episode:
    responses: list[list[Any]] = attrs.field(factory=list)  # per turn, per reply: BFCL's model_responses
    decoded: list[list[list[str]]] = attrs.field(factory=list)  # per turn, per executed step: the calls
    messages: list[dict[str, Any]] = attrs.field(factory=list)
    force_quit: bool = False
    calls: int = 0
    errors: list[str] = attrs.field(factory=list)  # replies that did not decode, and why


class Bfcl:
    """BFCL v4 multi-turn, played and scored as BFCL's own pipeline does."""

    name = "bfcl"
    Config = BfclConfig
    resumable_options = ("categories", "ids")  # choose tasks: a resume may change them
    headline_label = ("BFCL-MT overall: the unweighted mean of its categories' accuracies, as BFCL's leaderboard "
                      "reports multi-turn, then each category")

    def __init__(self, config: BfclConfig) -> None:
        self.config = config

    @staticmethod
    def headline(records: list[dict[str, Any]]) -> dict[str, float | None]:
        rates = category_rates(records)
        return {"overall": sum(rates.values()) / len(rates) if rates else None, **rates}

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        from prove_plugins.eval.servers import bfcl as bfcl_servers

        bfcl_servers.require_bfcl()
        policy = configured(policy, request_defaults(self.config.protocol))
        wanted_ids = set(self.config.ids)
        for category in self.config.categories:
            answers = bfcl_servers.ground_truth(category)
            taken = 0
            for entry in bfcl_servers.entries(category):
                if wanted_ids and entry["id"] not in wanted_ids:
                    continue
                if self.config.limit is not None and taken >= self.config.limit:
                    break
                taken += 1
                if not context.wanted(entry["id"]):
                    continue
                truth = answers[entry["id"]]
                begin_episode(policy, reference_of(truth, entry["involved_classes"]))
                yield self.run(policy, entry, truth, category)

    def run(self, policy: Policy, entry: dict[str, Any], truth: list[list[str]], category: str) -> Outcome:
        """Play and score one entry; a failed request fails it (BFCL's ``inference_error``)."""
        name = f"prove_{uuid.uuid4().hex}"  # the executor's and the checker's instances, kept apart
        episode = _Episode()
        try:
            try:
                self.play(policy, copy.deepcopy(entry), category, name, episode)
            except RequestFailed as exc:
                verdict = {"valid": False, "error_type": "multi_turn:inference_error",
                           "error_message": f"Error during inference: {exc}"}
                return self.outcome(episode, entry, truth, category, verdict,
                                    request_failed={"message": str(exc), "status": exc.status})
            return self.outcome(episode, entry, truth, category, self.check(episode, entry, truth, category, name))
        finally:
            _forget(name)

    def play(self, policy: Policy, entry: dict[str, Any], category: str, name: str, episode: _Episode) -> None:
        """BFCL's ``inference_multi_turn_FC`` / ``inference_multi_turn_prompting``."""
        from bfcl_eval.constants.default_prompts import (
            DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
            DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING,
        )
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response
        from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model

        from prove_plugins.eval.servers import bfcl as bfcl_servers

        prompting = self.config.protocol == "prompting"
        backends = _Backends(entry, category, name)
        held_out = entry.get("missed_function", {})
        questions = entry["question"]
        if prompting:
            questions[0] = system_prompt_pre_processing_chat_model(questions[0], entry["function"], entry["id"])
        tools = [] if prompting else bfcl_servers.openai_tools(entry["function"])
        messages = episode.messages
        for turn_index, question in enumerate(questions):
            if str(turn_index) in held_out:
                added = held_out[str(turn_index)]
                if prompting:
                    question = [{"role": "user",
                                 "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=added)}]
                else:
                    entry["function"].extend(added)
                    tools = bfcl_servers.openai_tools(entry["function"])
                    question = [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
            messages.extend(question)
            replies: list[Any] = []
            executed: list[list[str]] = []
            episode.responses.append(replies)
            episode.decoded.append(executed)
            while True:
                turn = policy.respond(messages, tools)
                step = _prompting_step(turn) if prompting else _fc_step(turn)
                messages.append(step.message)
                replies.append(step.responses)
                if step.calls is None:
                    episode.errors.append(step.error)
                    break
                if is_empty_execute_response(step.calls):
                    break
                replayed, results = backends.run(step.calls)
                executed.append(replayed)
                episode.calls += len(step.calls)
                if prompting:
                    messages.extend({"role": "tool", "name": call, "content": result}
                                    for call, result in zip(step.calls, results))
                else:
                    messages.extend({"role": "tool", "content": result, "tool_call_id": call_id}
                                    for result, call_id in zip(results, step.ids))
                if len(executed) > self.config.max_steps:
                    episode.force_quit = True
                    break
            if episode.force_quit:
                break

    def check(self, episode: _Episode, entry: dict[str, Any], truth: list[list[str]], category: str,
              name: str) -> dict[str, Any]:
        """BFCL's ``_evaluate_single_multi_turn_entry``."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        if len(episode.responses) != len(truth):
            return {"valid": False, "error_type": "multi_turn:force_terminated",
                    "error_message": f"force-terminated after more than {self.config.max_steps} steps in turn "
                                     f"{len(episode.responses) - 1}: {len(episode.responses)} of {len(truth)} turns played"}
        prompt = copy.deepcopy(entry)
        prompt.pop("function", None)  # as BFCL's runner hands the entry over
        return multi_turn_checker(episode.decoded, truth, prompt, f"multi_turn_{category}", name)

    def outcome(self, episode: _Episode, entry: dict[str, Any], truth: list[list[str]], category: str,
                verdict: dict[str, Any], **extra: Any) -> Outcome:
        details: dict[str, Any] = {"protocol": self.config.protocol, "decoded": episode.decoded,
                                   "force_quit": episode.force_quit, **extra}
        if episode.errors:
            details["undecoded"] = episode.errors
        if not verdict["valid"]:
            details["error_type"] = verdict.get("error_type")
            details["error_message"] = verdict.get("error_message")
        if self.config.transcripts:
            details["messages"] = episode.messages
            details["responses"] = episode.responses
        return Outcome(task_id=entry["id"], category=category, success=bool(verdict["valid"]),
                       metrics={"calls": float(episode.calls), "steps": float(sum(len(t) for t in episode.responses)),
                                "ground_truth_calls": float(sum(len(t) for t in truth))},
                       details=details)


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(Bfcl)
