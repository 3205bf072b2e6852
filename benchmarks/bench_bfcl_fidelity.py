"""Fidelity of `prove eval`'s BFCL evaluator to BFCL's own pipeline, entry by entry.

Deterministic, deliberately imperfect scripted policies (they loop on one call, send empty, null,
malformed or wrong-typed arguments, skip turns, repeat calls, call functions that do not exist,
answer with nothing, write calls in odd shapes ...) play the same BFCL v4 multi-turn entries twice:

- through PROVE: ``prove_plugins.eval.bfcl.Bfcl.evaluate`` with the policy as its model client
  (function calling: the policy's chat-completion message read by the ``openai`` client's own
  ``turn_from_message``; prompting: its text, as the ``hf`` client returns it);
- through BFCL: a subclass of BFCL's own handler (``OpenAICompletionsHandler`` for ``fc``,
  ``OSSHandler`` for ``prompting``) whose model query returns the same policy's reply, played by
  BFCL's ``inference`` loop, then scored by BFCL's runner (``_evaluate_single_multi_turn_entry``).

Per entry the verdicts (pass/fail and BFCL's error type) must agree, and so must the messages the
model is shown at every step (tool results included). Prints a table — policy x category: PROVE
passes, BFCL passes, disagreements, steps whose messages differ — and exits 1 on any
disagreement. ``--quick`` plays 2 entries per category; ``--per-category N`` N entries spread over
each category (default: all 200); ``--policies a,b``; ``--protocol fc|prompting``; ``--jobs N``.

BFCL's handler module imports ``overrides`` and its runner imports its registry of every vendor's
model; neither is needed to play or score here. Without ``overrides`` installed, a stand-in
supplies its decorators (markers only), and the registry is replaced by an empty one while the
runner is imported when the vendor SDKs it imports are missing.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# bfcl-eval writes lock files under BFCL_PROJECT_ROOT: outside site-packages, as prove eval sets it
os.environ.setdefault("BFCL_PROJECT_ROOT", os.path.join(tempfile.gettempdir(), "prove-bfcl"))

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")


# -- BFCL's own pipeline, importable without the vendor SDKs ---------------------------------------


def bfcl_pipeline() -> types.SimpleNamespace:
    """BFCL's handler classes and its runner's per-entry scoring function."""
    try:
        import overrides  # noqa: F401
    except ImportError:  # markers only: they change nothing a handler does
        shim = types.ModuleType("overrides")
        shim.final = shim.override = lambda f: f  # type: ignore[attr-defined]
        shim.EnforceOverrides = type("EnforceOverrides", (), {})  # type: ignore[attr-defined]
        sys.modules["overrides"] = shim
    try:
        from bfcl_eval.eval_checker import eval_runner
    except ImportError:  # a vendor SDK of BFCL's model registry is missing: the runner needs no entry of it
        stub = types.ModuleType("bfcl_eval.constants.model_config")
        stub.MODEL_CONFIG_MAPPING = {}  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = stub
        try:
            from bfcl_eval.eval_checker import eval_runner
        finally:
            del sys.modules["bfcl_eval.constants.model_config"]
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
    from bfcl_eval.model_handler.local_inference.base_oss_handler import OSSHandler

    def override(method: Any) -> Any:
        """What ``overrides.override`` marks (its own check cannot see base classes named in a function)."""
        method.__override__ = True
        return method

    class FunctionCalling(OpenAICompletionsHandler):
        """BFCL's OpenAI function-calling handler; the "API" answers with the script's message."""

        script: Callable[[list[dict[str, Any]]], dict[str, Any]]
        seen: list[list[dict[str, Any]]]

        def _build_client_kwargs(self) -> dict[str, Any]:
            return {"api_key": "stand-in", "base_url": "http://127.0.0.1:9/v1"}  # never called

        def _query_FC(self, inference_data: dict) -> tuple[Any, float]:  # noqa: N802 - BFCL's name
            from openai.types.chat import ChatCompletion

            messages = [plain(m) for m in inference_data["message"]]
            self.seen.append(messages)
            reply = self.script(messages)
            completion = {"id": "stand-in", "object": "chat.completion", "created": 0, "model": self.model_name,
                          "choices": [{"index": 0, "finish_reason": "stop", "message": reply}],
                          "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
            return ChatCompletion.model_validate(completion), 0.0

    class Prompting(OSSHandler):
        """BFCL's handler for local checkpoints (prompting); the "server" completes with the script's text."""

        script: Callable[[list[dict[str, Any]]], str]
        seen: list[list[dict[str, Any]]]

        @override
        def _query_prompting(self, inference_data: dict) -> tuple[Any, float]:
            messages = [plain(m) for m in inference_data["message"]]
            self.seen.append(messages)
            text = self.script(messages)
            response = types.SimpleNamespace(choices=[types.SimpleNamespace(text=text)],
                                             usage=types.SimpleNamespace(prompt_tokens=0, completion_tokens=0))
            return response, 0.0

    return types.SimpleNamespace(fc=FunctionCalling, prompting=Prompting,
                                 evaluate_entry=eval_runner._evaluate_single_multi_turn_entry)


def plain(message: Any) -> dict[str, Any]:
    """A chat message as a plain dict (BFCL keeps the SDK's message objects in its history)."""
    if hasattr(message, "model_dump"):
        return message.model_dump(exclude_unset=True)
    return copy.deepcopy(dict(message))


def forget(prefix: str) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    space = vars(multi_turn_utils)
    for key in [k for k in space if k.startswith(prefix)]:
        del space[key]


# -- the scripted policies -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Situation:
    """Where a conversation stands, and the entry's ground truth (parsed, and as BFCL writes it)."""

    gt: list[list[tuple[str, dict[str, Any]]]]
    raw: list[list[str]]
    turn: int
    step: int

    @property
    def now(self) -> list[tuple[str, dict[str, Any]]]:
        return self.gt[self.turn] if self.turn < len(self.gt) else []

    @property
    def last(self) -> bool:
        return self.turn == len(self.gt) - 1

    @property
    def anchor(self) -> tuple[str, dict[str, Any]]:
        """The turn's first ground-truth call, else the entry's first."""
        return (self.now or next(t for t in self.gt if t))[0]


def position(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(user turn, replies since it): what the scripts key on."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    since = sum(1 for m in messages[users[-1] + 1:] if m.get("role") == "assistant") if users else 0
    return len(users) - 1, since


def calls(s: Situation, chosen: list[tuple[str, dict[str, Any]]], arguments: Callable[[dict[str, Any]], str] = json.dumps,
          content: str | None = None) -> dict[str, Any]:
    """An assistant message calling ``chosen`` (ids from the position: both pipelines see the same)."""
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": f"call_{s.turn}_{s.step}_{i}", "type": "function",
                            "function": {"name": name, "arguments": arguments(args)}}
                           for i, (name, args) in enumerate(chosen)]}


def prose(text: str = "Done.") -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def wrong(arguments: dict[str, Any]) -> dict[str, Any]:
    """Every argument of the wrong type: numbers as text, booleans as words, lists as one string."""
    def cast(v: Any) -> Any:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, int | float):
            return str(v)
        if isinstance(v, list):
            return ", ".join(map(str, v))
        if isinstance(v, str) and v.isdigit():
            return int(v)
        return v
    return {k: cast(v) for k, v in arguments.items()}


def fc_oracle(s: Situation) -> dict[str, Any]:
    return calls(s, s.now) if s.step == 0 and s.now else prose()


def on_first_step(make: Callable[[Situation], dict[str, Any]]) -> Callable[[Situation], dict[str, Any]]:
    return lambda s: make(s) if s.step == 0 and s.now else prose()


FC_POLICIES: dict[str, Callable[[Situation], dict[str, Any]]] = {
    "oracle": fc_oracle,
    "sequential": lambda s: calls(s, s.now[s.step:s.step + 1]) if s.step < len(s.now) else prose(),
    "reversed": on_first_step(lambda s: calls(s, s.now[::-1])),
    "loop_last_turn": lambda s: calls(s, [s.anchor]) if s.last else fc_oracle(s),
    "loop_first_turn": lambda s: calls(s, [s.anchor]) if s.turn == 0 else fc_oracle(s),
    # the oracle, then in the last turn an unknown function, again and again: force-quit in the last turn
    "oracle_then_loop_in_last_turn": lambda s: (calls(s, [("lookup_everything", {"query": "more"})])
                                                if s.last and (s.step > 0 or not s.now) else fc_oracle(s)),
    "empty_arguments": on_first_step(lambda s: calls(s, s.now, arguments=lambda a: "")),
    "empty_object_arguments": on_first_step(lambda s: calls(s, s.now, arguments=lambda a: "{}")),
    "null_arguments": on_first_step(lambda s: calls(s, s.now, arguments=lambda a: "null")),
    "malformed_json": on_first_step(lambda s: calls(s, s.now, arguments=lambda a: json.dumps(a)[:-1])),
    "wrong_types": on_first_step(lambda s: calls(s, [(n, wrong(a)) for n, a in s.now])),
    "skip_odd_turns": lambda s: prose("I'd rather not.") if s.turn % 2 else fc_oracle(s),
    "repeat_calls": on_first_step(lambda s: calls(s, s.now + s.now)),
    "unknown_function_first": lambda s: (calls(s, [("lookup_everything", {"query": "all"})]) if s.step == 0
                                         else calls(s, s.now) if s.step == 1 and s.now else prose()),
    "empty_reply_first_turn": lambda s: prose("") if s.turn == 0 else fc_oracle(s),
    "null_reply_first_turn": lambda s: prose(None) if s.turn == 0 else fc_oracle(s),  # type: ignore[arg-type]
    "empty_tool_calls_list": lambda s: ({"role": "assistant", "content": "Nothing to call.", "tool_calls": []}
                                        if s.turn == 1 else fc_oracle(s)),
    "one_call_then_prose": on_first_step(lambda s: calls(s, s.now[:1], content="First things first.")),
    "calls_ahead": on_first_step(lambda s: calls(s, s.now + (s.gt[s.turn + 1] if not s.last else []))),
}


def text_of(chosen: list[tuple[str, dict[str, Any]]], value: Callable[[Any], str] = repr) -> str:
    return ", ".join(f"{name}({', '.join(f'{k}={value(v)}' for k, v in args.items())})" for name, args in chosen)


def listed(chosen: list[tuple[str, dict[str, Any]]], value: Callable[[Any], str] = repr) -> str:
    return f"[{text_of(chosen, value)}]"


def text_oracle(s: Situation) -> str:
    return listed(s.now) if s.step == 0 and s.now else "Done."


def text_first_step(make: Callable[[Situation], str]) -> Callable[[Situation], str]:
    return lambda s: make(s) if s.step == 0 and s.now else "Done."


def arithmetic(v: Any) -> str:
    return f"{v - 1} + 1" if isinstance(v, int) and not isinstance(v, bool) else repr(v)


def concatenated(v: Any) -> str:
    """A string of two or more characters written as two literals joined by ``+`` (``'doc' + 'ument'``)."""
    if isinstance(v, str) and len(v) > 1:
        return f"{v[:len(v) // 2]!r} + {v[len(v) // 2:]!r}"
    return repr(v)


TEXT_POLICIES: dict[str, Callable[[Situation], str]] = {
    "oracle": text_oracle,
    "sequential": lambda s: listed(s.now[s.step:s.step + 1]) if s.step < len(s.now) else "Done.",
    "loop_last_turn": lambda s: listed([s.anchor]) if s.last else text_oracle(s),
    "loop_first_turn": lambda s: listed([s.anchor]) if s.turn == 0 else text_oracle(s),
    "oracle_then_loop_in_last_turn": lambda s: ("[lookup_everything(query='more')]" if s.last and (s.step > 0 or not s.now)
                                                else text_oracle(s)),
    "empty_reply_first_turn": lambda s: "" if s.turn == 0 else text_oracle(s),
    "prose_only": lambda s: "I have taken care of everything you asked.",
    "in_backticks": text_first_step(lambda s: f"```\n{listed(s.now)}\n```"),
    "in_python_fence": text_first_step(lambda s: f"```python\n{listed(s.now)}\n```"),
    "bare_calls": text_first_step(lambda s: text_of(s.now)),
    "ground_truth_strings": text_first_step(lambda s: "[" + ", ".join(s.raw[s.turn]) + "]"),  # positional args
    "malformed": text_first_step(lambda s: listed(s.now)[:-2]),
    "wrong_types": text_first_step(lambda s: listed([(n, wrong(a)) for n, a in s.now])),
    "arithmetic_arguments": text_first_step(lambda s: listed(s.now, arithmetic)),
    "concatenated_strings": text_first_step(lambda s: listed(s.now, concatenated)),
    "nested_call_argument": text_first_step(lambda s: listed([(n, {**a, "note": {"pwd": {}}}) for n, a in s.now])),
    "unknown_function_first": lambda s: ("[lookup_everything(query='all')]" if s.step == 0
                                         else listed(s.now) if s.step == 1 and s.now else "Done."),
}

POLICIES = {"fc": FC_POLICIES, "prompting": TEXT_POLICIES}


def situation(entry: dict[str, Any], truth: list[list[str]], messages: list[dict[str, Any]]) -> Situation:
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    turn, step = position(messages)
    gt = [[bfcl_servers.parse_call(c, entry["involved_classes"]) for c in t] for t in truth]
    return Situation(gt=gt, raw=truth, turn=turn, step=step)


# -- the two pipelines -----------------------------------------------------------------------------


class ScriptClient:
    """The policy as a PROVE model client: its reply read the way the openai client reads a chat
    completion (fc) or returned as the text a local checkpoint generated (prompting)."""

    name = "script"

    def __init__(self, policy: Callable[[Situation], Any], protocol: str, plays: list[tuple[dict, list]]) -> None:
        self.policy, self.protocol = policy, protocol
        self.queue = list(plays)  # the evaluator plays the entries in this order
        self.seen: list[list[list[dict[str, Any]]]] = []
        self.entry: dict[str, Any] = {}
        self.truth: list[list[str]] = []

    def begin(self, reference: Any) -> None:
        self.entry, self.truth = self.queue.pop(0)
        assert [[a.name for a in t.attempts] for turn in reference.turns for t in turn] == \
            [[c.split("(")[0] for c in t] for t in self.truth if t], "the evaluator plays another entry"
        self.seen.append([])

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        from prove_core.reward.rollout import PolicyTurn
        from prove_plugins.train.models.clients import turn_from_message

        shown = [plain(m) for m in messages]
        self.seen[-1].append(shown)
        reply = self.policy(situation(self.entry, self.truth, shown))
        if self.protocol == "fc":
            return turn_from_message(copy.deepcopy(reply))
        return PolicyTurn(content=reply.strip(), raw=reply)


@attrs.frozen(kw_only=True)
class Verdict:
    id: str
    valid: bool
    error_type: str | None
    seen: list[list[dict[str, Any]]]  # the messages shown at each step


def run_prove(policy: str, protocol: str, category: str, ids: list[str]) -> list[Verdict]:
    from prove_core.eval.core import EvalContext
    from prove_plugins.eval.bfcl import Bfcl, BfclConfig
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    wanted = set(ids)
    plays = [e for e in bfcl_servers.entries(category) if e["id"] in wanted]  # the evaluator's order
    truth = bfcl_servers.ground_truth(category)
    client = ScriptClient(POLICIES[protocol][policy], protocol, [(e, truth[e["id"]]) for e in plays])
    evaluator = Bfcl(BfclConfig(categories=[category], ids=list(ids), protocol=protocol, transcripts=False))
    context = EvalContext(registry=None, experiment=None, out_dir=Path("."), model="script")
    outcomes = list(evaluator.evaluate(client, context))
    verdicts = {o.task_id: Verdict(id=o.task_id, valid=o.success, error_type=o.details.get("error_type"), seen=seen)
                for o, seen in zip(outcomes, client.seen)}
    return [verdicts[i] for i in ids]


def run_bfcl(policy: str, protocol: str, category: str, ids: list[str], pipeline: Any = None) -> list[Verdict]:
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    pipeline = pipeline or bfcl_pipeline()
    entries = {e["id"]: e for e in bfcl_servers.entries(category)}
    truth = bfcl_servers.ground_truth(category)
    name = f"standin_{uuid.uuid4().hex[:12]}"
    fc = protocol == "fc"
    handler = (pipeline.fc if fc else pipeline.prompting)(model_name=name, temperature=0.001,
                                                          registry_name=f"{name}-FC" if fc else name, is_fc_model=fc)
    script = POLICIES[protocol][policy]
    verdicts = []
    for entry_id in ids:
        entry, answer = entries[entry_id], truth[entry_id]
        handler.seen = []
        handler.script = lambda messages, entry=entry, answer=answer: script(situation(entry, answer, messages))
        with contextlib.redirect_stdout(io.StringIO()):
            try:  # as bfcl's multi_threaded_inference records a failed inference
                result, _ = handler.inference(copy.deepcopy(entry), include_input_log=False, exclude_state_log=True)
            except Exception as exc:  # noqa: BLE001
                result = f"Error during inference: {exc}"
            scored = pipeline.evaluate_entry(handler, entry_id, result, answer, copy.deepcopy(entry), name,
                                             f"multi_turn_{category}")
        forget(f"{name}_")
        error = scored.get("error", {}).get("error_type") if not scored["valid"] else None
        verdicts.append(Verdict(id=entry_id, valid=bool(scored["valid"]), error_type=error, seen=handler.seen))
    return verdicts


def spread(category: str, n: int | None) -> list[str]:
    """``n`` entry ids spread evenly over the category (all of them for ``None``)."""
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    ids = [e["id"] for e in bfcl_servers.entries(category)]
    if n is None or n >= len(ids):
        return ids
    return [ids[round(i * len(ids) / n)] for i in range(n)]


@attrs.frozen(kw_only=True)
class Cell:
    policy: str
    protocol: str
    category: str
    n: int
    prove: int
    bfcl: int
    disagreements: list[str]  # entry ids whose verdicts differ
    message_mismatches: list[str]  # entry ids whose shown messages differ at some step
    tool_messages: int  # tool results compared
    seconds: float


def compare(policy: str, protocol: str, category: str, ids: list[str]) -> Cell:
    started = time.perf_counter()
    ours = run_prove(policy, protocol, category, ids)
    theirs = run_bfcl(policy, protocol, category, ids)
    disagreements = [a.id for a, b in zip(ours, theirs) if (a.valid, a.error_type) != (b.valid, b.error_type)]
    mismatches = [a.id for a, b in zip(ours, theirs) if a.seen != b.seen]
    tools = sum(1 for v in ours for m in (v.seen[-1] if v.seen else []) if m.get("role") == "tool")
    return Cell(policy=policy, protocol=protocol, category=category, n=len(ids), prove=sum(v.valid for v in ours),
                bfcl=sum(v.valid for v in theirs), disagreements=disagreements, message_mismatches=mismatches,
                tool_messages=tools, seconds=time.perf_counter() - started)


def _compare(job: tuple[str, str, str, list[str]]) -> Cell:
    return compare(*job)


def table(cells: list[Cell]) -> str:
    lines = ["| protocol | policy | " + " | ".join(CATEGORIES) + " | disagreements | message mismatches |",
             "| --- | --- |" + " --- |" * (len(CATEGORIES) + 2)]
    rows: dict[tuple[str, str], dict[str, Cell]] = {}
    for cell in cells:
        rows.setdefault((cell.protocol, cell.policy), {})[cell.category] = cell
    for (protocol, policy), by in rows.items():
        shown = [f"{by[c].prove} / {by[c].bfcl} of {by[c].n}" if c in by else "–" for c in CATEGORIES]
        lines.append(f"| {protocol} | {policy} | " + " | ".join(shown)
                     + f" | {sum(len(c.disagreements) for c in by.values())}"
                     + f" | {sum(len(c.message_mismatches) for c in by.values())} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 entries per category")
    parser.add_argument("--per-category", type=int, default=None, help="entries per category, spread (default: all)")
    parser.add_argument("--policies", default="", help="comma-separated policy names (default: all)")
    parser.add_argument("--protocol", choices=["fc", "prompting", "both"], default="both")
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    from prove_core.logging import configure
    from prove_plugins.eval.servers import bfcl as bfcl_servers

    configure(level="warning")
    bfcl_servers.require_bfcl()
    bfcl_pipeline()  # fail early, before forking, if BFCL's pipeline cannot be imported
    per = 2 if args.quick else args.per_category
    wanted = {p for p in args.policies.split(",") if p}
    protocols = ["fc", "prompting"] if args.protocol == "both" else [args.protocol]
    categories = [c for c in args.categories.split(",") if c]
    jobs = [(policy, protocol, category, spread(category, per))
            for protocol in protocols for policy in POLICIES[protocol] if not wanted or policy in wanted
            for category in categories]
    started = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            cells = list(pool.map(_compare, jobs))
    else:
        cells = [_compare(job) for job in jobs]
    print(table(cells))
    entries = sum(c.n for c in cells)
    bad = [(c.protocol, c.policy, c.category, c.disagreements, c.message_mismatches) for c in cells
           if c.disagreements or c.message_mismatches]
    print(f"\n{len(jobs)} policy x category cells, {entries} entries played by both pipelines, "
          f"{sum(c.tool_messages for c in cells)} tool results compared, {time.perf_counter() - started:.0f} s")
    for protocol, policy, category, verdicts, messages in bad:
        print(f"DISAGREE {protocol}/{policy}/{category}: verdicts {verdicts[:10]} messages {messages[:10]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
