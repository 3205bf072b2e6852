"""PROVE episodes driven by OpenRLHF's multi-turn agent loop (``openrlhf.utils.agent``).

OpenRLHF generates (vLLM) and calls the agent's ``reset`` once and ``step`` after every turn.
``Episode`` turns that into a normal PROVE rollout: ``prove_core.reward.rollout.rollout`` runs in a
worker thread with a policy whose ``respond`` hands the conversation to OpenRLHF and waits for the
model's text. So the episode plays exactly as in the ``trl`` backend and in evaluation: the first
observation is the system prompt, the tools and the first user turn rendered with the model's
chat template; every tool call is parsed from the model's text and executed on **this episode's
own live session** (forked from the task's seed, after a check that the servers still match the
task record: ``prove_core.env.drift.check_task``, a drifted task fails the episode with
``TaskDrift``); the environment's feedback is the text the
chat template adds after the model's turn (tool results, the next user turn); when the episode
ends, the PROVE reward of the whole rollout is the step's reward.

The generated ``agent.py`` of a run directory is a thin shim over this module; the run's
``prove_setup.json`` says which tokenizer, parser, reward and servers to use.
"""

from __future__ import annotations

import functools
import json
import queue
import threading
from typing import Any

from prove_core.env.drift import check_task
from prove_core.model import Example, from_json
from prove_core.reward.rollout import PolicyTurn, rollout
from prove_plugins.train.run_setup import load_run_setup


@functools.lru_cache(maxsize=4)
def setup(path: str) -> dict[str, Any]:
    """The run's settings (``run_setup.load_run_setup``: parser, reward, environments, limits) plus
    the loaded tokenizer, once per process: every episode of an OpenRLHF engine shares them."""
    from transformers import AutoTokenizer

    from prove_plugins.train.models.template import apply_tool_settings

    loaded = load_run_setup(path)
    tokenizer = AutoTokenizer.from_pretrained(loaded["tokenizer"])
    # a model whose own template cannot render tools gets PROVE's, as in `prove train` (never a silent drop)
    apply_tool_settings(tokenizer, loaded.get("tool_detail"), loaded.get("max_tool_chars"), echo=print,
                        name=loaded["tokenizer"])
    return {**loaded, "tokenizer_object": tokenizer}


class _Handoff:
    """A policy whose turns come from outside: ``respond`` publishes the conversation and waits."""

    name = "openrlhf"

    def __init__(self, parser: Any, events: queue.Queue) -> None:
        self.parser = parser
        self.events = events
        self.actions: queue.Queue = queue.Queue()

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        from prove_core.reward.parsing import safe_parse

        self.events.put(("turn", list(messages), list(tools)))
        text = self.actions.get()
        if text is None:  # the episode was abandoned
            raise _Abandoned
        parsed = safe_parse(self.parser, text)
        return PolicyTurn(content=parsed.content.strip(), attempts=parsed.attempts, raw=text)


class _Abandoned(Exception):
    pass


class Episode:
    """One OpenRLHF episode on its own live session (see the module docstring)."""

    def __init__(self, setup_path: str, label: str) -> None:
        self.setup = setup(str(setup_path))
        record = json.loads(label)
        self.example: Example = from_json(record["example"] if "example" in record else record, Example)
        self.tokenizer = self.setup["tokenizer_object"]
        self.events: queue.Queue = queue.Queue()
        self.policy = _Handoff(self.setup["parser_object"], self.events)
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.turns = 0
        self.result: Any = None
        self._thread: threading.Thread | None = None

    def _play(self) -> None:
        env = self.setup["environments"](self.example.task)
        try:
            check_task(env, self.example.task)  # TaskDrift: the servers no longer match the record
            played = rollout(self.policy, self.example, env, limits=self.setup["limits_object"])
        except _Abandoned:
            return
        except BaseException as exc:  # reported to the waiting step
            self.events.put(("error", exc, None))
            return
        self.events.put(("done", played, None))

    def _next(self) -> tuple[str, Any, Any]:
        kind, a, b = self.events.get()
        if kind == "error":
            raise a
        return kind, a, b

    def start(self) -> str:
        """Start the episode; returns the first observation (prompt with tools, generation header)."""
        from prove_plugins.train.models.hf import render

        self._thread = threading.Thread(target=self._play, daemon=True)
        self._thread.start()
        kind, messages, tools = self._next()
        if kind == "done":  # no user turn at all
            self.result = messages
            return ""
        self.messages, self.tools = messages, tools
        return render(self.tokenizer, messages, tools, add_generation_prompt=True)

    def act(self, action_text: str, *, closed: bool = True) -> tuple[str, bool, float, dict[str, float]]:
        """The model's turn in; ``(environment feedback, done, reward, logs)`` out. ``closed``:
        the model ended its turn itself (False when generation stopped at the token limit)."""
        from prove_plugins.train.models.hf import continuation

        if self.result is not None:
            return "", True, self._reward()[0], self._reward()[1]
        seen = len(self.messages)
        self.turns += 1
        self.policy.actions.put(action_text)
        kind, messages, tools = self._next()
        if kind == "done":
            self.result = messages
            total, logs = self._reward()
            return "", True, total, logs
        feedback = continuation(self.tokenizer, messages, seen, tools, closed=closed)
        self.messages, self.tools = messages, tools
        return feedback, False, 0.0, {}

    def _reward(self) -> tuple[float, dict[str, float]]:
        scored = self.setup["reward_object"].score(self.result.rollout)
        logs = {f"prove/{name}": s.value for name, s in scored.scores.items() if s.applies}
        logs["prove/calls"] = float(len(self.result.rollout.calls))
        return scored.total, logs

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self.policy.actions.put(None)
