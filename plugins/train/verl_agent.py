"""PROVE rollouts as a verl agent loop (``verl.experimental.agent_loop``, verl 0.9).

verl's agent loop worker builds one agent loop per rollout from the ``agent_loop.yaml`` that
``prove train`` (backend ``verl``) writes, and awaits its ``run(sampling_params, **row)``: the row is
the parquet row (``raw_prompt``, ``extra_info``, ...), ``extra_info["example"]`` the whole PROVE example.
``ProveAgentLoop.run`` plays that example as a normal PROVE rollout:

- ``prove_core.reward.rollout.rollout`` (the loop the ``trl`` and ``openrlhf`` backends and evaluation
  use) runs in a thread of its own, with a policy whose ``respond`` hands each assistant turn to the
  agent loop's event loop and waits for the model's text. So the episode plays exactly as
  everywhere else in PROVE: the example's user turns in order, tool calls parsed from the model's
  text with the run's parser (``safe_parse``), every call executed on **this rollout's own live
  session** (opened fresh at the task's seed from ``Environments``), a call to a tool that was not
  offered answered with UNKNOWN_TOOL, up to the turn limits, and the ``Rollout`` the reward scores.
  The rollout's own thread (not the event loop's executor, whose threads ``ct_*`` need) keeps the
  event loop free for the other rollouts of the worker while tools and the reward run;
- tokens follow verl's contract for agent loops (as ``ToolAgentLoop`` does): the prompt with the
  task's tools from ``ct_build_initial_tokens``, each generation from ``self.server_manager.generate``
  merged with ``ct_merge_assistant_token`` (response mask 1, its log-probs kept), the messages the
  environment adds after it (parse-failure notes, tool results, the next user turn) merged with
  ``ct_merge_context_msg`` (mask 0). A turn cut at its token budget is closed with the end-of-turn
  token (mask 0) before the environment's messages, as the chat template would have closed it;
- before the episode starts, the session it opened is checked against the task
  (``prove_core.env.drift.check_task``): a task whose tools or seed state drifted raises
  ``TaskDrift`` out of ``run`` before a token is generated. verl's v1 trainer (the launch script's)
  logs the error, marks the rollout's group failed and trains on none of it (the launch script
  has it refill such a group with another prompt);
- the session is closed whatever happens (a generation that raises, a cancelled rollout);
- ``reward_score`` is the PROVE reward of the whole rollout, and ``extra_fields["reward_extra_info"]``
  carries the total, the best attainable total, the number of calls and every component
  (``prove/<name>``; ``None`` where a component does not apply to the task, which verl's validation
  metrics skip), reported by verl's validation (``val-aux/<data source>/prove/<name>/mean@n``) and
  in its generation dumps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from prove_core.env.drift import check_task
from prove_core.model import Example, from_json
from prove_core.reward.rollout import Played, PolicyTurn, RolloutLimits, rollout
from prove_plugins.train.models.template import apply_tool_settings
from prove_plugins.train.run_setup import load_run_setup

SETUP_ENV = "PROVE_VERL_SETUP"  # the setup file when the agent loop config does not name one
# Counters a rollout server may report per generation that add up over the turns (as ToolAgentLoop sums them).
SUMMED_EXTRA_KEYS = ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")

_T = TypeVar("_T")


# The run's prove_setup.json with its parser, reward and environments built, once per process: every
# rollout of an agent loop worker shares them (each still opens its own session).
load_setup = load_run_setup


def example_of(extra_info: Any) -> Example:
    """The PROVE example a verl row carries in ``extra_info["example"]`` (JSON text)."""
    record = (extra_info or {}).get("example") if isinstance(extra_info, dict) else None
    if record is None:
        raise ValueError("this row has no extra_info.example: write the data with `prove train` (backend verl)")
    data = json.loads(record) if isinstance(record, str) else record
    return from_json(data, Example)


class _EpisodeEnv:
    """The task's environment as ``rollout`` sees it, for one episode: the session ``rollout`` opens is
    checked against the task before the episode starts (``check_task``), and remembered so that the
    agent loop closes it however the episode ends."""

    def __init__(self, env: Any, task: Any) -> None:
        self.env = env
        self.task = task
        self.session_id: str | None = None

    def new_session(self, session_id: str | None = None) -> str:
        sid = self.env.new_session(session_id)
        self.session_id = sid
        check_task(self.env, self.task, sid)  # TaskDrift: the rollout fails before its first turn
        return str(sid)

    def __getattr__(self, name: str) -> Any:  # call, state_hash, close, episode_start, episode_end, ...
        return getattr(self.env, name)


class _Abandoned(Exception):
    """The agent loop gave the rollout up (its task was cancelled): end the episode now."""


class _HandOff:
    """A PROVE policy whose turns come from the agent loop: ``respond`` (in the rollout's thread) runs
    one assistant turn on the event loop and parses the text the model generated."""

    name = "verl"

    def __init__(self, turn: Callable[[list[dict[str, Any]], list[dict[str, Any]]], Coroutine[Any, Any, str]],
                 loop: asyncio.AbstractEventLoop, parser: Any) -> None:
        self.turn = turn
        self.loop = loop
        self.parser = parser
        self.abandoned = False
        self.pending: concurrent.futures.Future[str] | None = None
        self.tool_seconds = 0.0  # time between turns: tool calls and the rollout's own work
        self._returned: float | None = None

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        from prove_core.reward.parsing import safe_parse

        if self._returned is not None:
            self.tool_seconds += time.perf_counter() - self._returned
        if self.abandoned:
            raise _Abandoned
        self.pending = asyncio.run_coroutine_threadsafe(self.turn(list(messages), list(tools)), self.loop)
        try:
            text = self.pending.result()
        except concurrent.futures.CancelledError:
            raise _Abandoned from None
        finally:
            self.pending = None
        self._returned = time.perf_counter()
        parsed = safe_parse(self.parser, text)
        return PolicyTurn(content=parsed.content.strip(), attempts=parsed.attempts, raw=text)

    def abandon(self) -> None:
        self.abandoned = True
        pending = self.pending
        if pending is not None:
            pending.cancel()


class _Tokens:
    """One rollout's token stream as verl's ``ToolAgentLoop`` keeps it: ``ids`` is the whole sequence
    (prompt, then the response), ``mask``/``logprobs`` cover the response part."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.seen = 0  # messages already in ``ids`` (the model's own turn counted as one)
        self.closed = True  # the last generation ended with an end-of-turn token
        self.stopped = False  # the response budget is spent: no more generation
        self.extra: dict[str, Any] = {}
        self.generate_seconds = 0.0
        self.num_preempted: int | None = None


class ProveAgentLoop(AgentLoopBase):
    """One PROVE rollout on its own live session, scored with the PROVE reward (see the module docstring).

    Registered by the run's ``agent_loop.yaml``; verl's worker instantiates it with hydra, passing
    ``setup`` (the run's ``prove_setup.json``) from that file."""

    def __init__(self, *args: Any, setup: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = setup or os.environ.get(SETUP_ENV)
        if not path:
            raise ValueError(f"ProveAgentLoop needs the run's prove_setup.json: `setup` in agent_loop.yaml or ${SETUP_ENV}")
        self.setup = load_setup(str(path))
        # a model whose own template cannot render tools gets PROVE's, as in `prove train` (never a silent drop)
        apply_tool_settings(self.tokenizer, self.setup.get("tool_detail"), self.setup.get("max_tool_chars"),
                            echo=print, name=str(self.setup.get("tokenizer")))
        multi_turn = self.rollout_config.multi_turn
        limits: RolloutLimits = self.setup["limits_object"]
        # actor_rollout_ref.rollout.multi_turn wins over the setup file, so the launch overrides are what applies.
        self.limits = RolloutLimits(max_user_turns=multi_turn.max_user_turns or limits.max_user_turns,
                                    max_assistant_turns=multi_turn.max_assistant_turns or limits.max_assistant_turns)
        self.response_length = int(self.rollout_config.response_length)
        self.max_new_tokens = int(self.setup.get("max_new_tokens") or self.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        example = example_of(kwargs.get("extra_info"))
        loop = asyncio.get_running_loop()
        tokens = _Tokens()
        request_id = uuid4().hex

        async def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
            return await self._turn(tokens, request_id, sampling_params, messages, tools)

        policy = _HandOff(turn, loop, self.setup["parser_object"])
        env = self.setup["environments"](example.task)
        reward = self.setup["reward_object"]
        timing: dict[str, float] = {}

        def play() -> tuple[Played, Any]:
            episode: Any = _EpisodeEnv(env, example.task)  # an Environment to rollout()
            try:
                played = rollout(policy, example, episode, limits=self.limits, rollout_id=f"{example.id}@{request_id}")
                started = time.perf_counter()
                scored = reward.score(played.rollout)
                timing["compute_score"] = time.perf_counter() - started
                return played, scored
            finally:
                if episode.session_id is not None:
                    env.close(episode.session_id)

        try:
            played, scored = await _in_own_thread(loop, play, name=f"prove-verl-{example.id}")
        except asyncio.CancelledError:
            policy.abandon()  # the thread ends at its next turn and closes the session itself
            raise
        return self._output(tokens, played, scored, policy, timing)

    async def _turn(self, tokens: _Tokens, request_id: str, sampling_params: dict[str, Any],
                    messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        """One assistant turn: bring the token stream up to ``messages``, generate, return the text."""
        if tokens.stopped:
            return ""
        if not tokens.ids:
            tokens.ids = await self.ct_build_initial_tokens(messages, tools=tools)
        else:
            if not tokens.closed and self.tokenizer.eos_token_id is not None:
                # The model's turn hit its token budget: close it as the template would (not the model's token).
                tokens.ids.append(self.tokenizer.eos_token_id)
                tokens.mask.append(0)
                if tokens.logprobs:
                    tokens.logprobs.append(0.0)
            merged, mask, logprobs = await self.ct_merge_context_msg(
                messages[: tokens.seen], messages, tokens.ids, tokens.mask, tokens.logprobs or None, tools=tools)
            if len(mask) >= self.response_length:  # as ToolAgentLoop: no room for another turn
                tokens.stopped = True
                return ""
            tokens.ids, tokens.mask = merged.token_ids, mask
            if tokens.logprobs:
                tokens.logprobs = logprobs or []
        budget = min(self.max_new_tokens, self.response_length - len(tokens.mask))
        if budget <= 0:
            tokens.stopped = True
            return ""
        started = time.perf_counter()
        output = await self.server_manager.generate(request_id=request_id, prompt_ids=tokens.ids,
                                                    sampling_params={**sampling_params, "max_tokens": budget})
        tokens.generate_seconds += time.perf_counter() - started
        self._merge_extra(tokens, output)
        generated = list(output.token_ids)
        log_probs = list(output.log_probs) if output.log_probs else None
        merged, mask, logprobs = await self.ct_merge_assistant_token(
            tokens.ids, generated, tokens.mask, tokens.logprobs if (tokens.logprobs or log_probs) else None,
            assistant_logprobs=log_probs)
        tokens.ids, tokens.mask = merged.token_ids, mask
        if logprobs is not None:
            tokens.logprobs = logprobs
        tokens.seen = len(messages) + 1  # rollout appends the parsed assistant message next
        tokens.closed = bool(generated) and generated[-1] == self.tokenizer.eos_token_id
        if len(tokens.mask) >= self.response_length:
            tokens.stopped = True
        return self._text(generated[:-1] if tokens.closed else generated)

    def _text(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        for token in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            if token:
                text = text.replace(token, "")
        return str(text)

    @staticmethod
    def _merge_extra(tokens: _Tokens, output: Any) -> None:
        """The rollout server's per-generation fields, kept as ToolAgentLoop keeps them (the weight
        versions verl's staleness control reads, summed speculative-decoding counters)."""
        extra = dict(getattr(output, "extra_fields", None) or {})
        preempted = getattr(output, "num_preempted", None)
        tokens.num_preempted = (preempted if preempted is not None else -1) if tokens.num_preempted is None else \
            tokens.num_preempted + (preempted or 0)
        if not tokens.extra:
            tokens.extra.update(extra)
            return
        if extra.get("max_global_steps"):
            tokens.extra["max_global_steps"] = extra["max_global_steps"]
        for key in SUMMED_EXTRA_KEYS:
            if key in extra and key in tokens.extra:
                tokens.extra[key] = int(tokens.extra[key]) + int(extra[key])

    def _output(self, tokens: _Tokens, played: Played, scored: Any, policy: _HandOff,
                timing: dict[str, float]) -> AgentLoopOutput:
        if not tokens.ids:
            raise ValueError(f"{played.rollout.id}: the example has no user turn, so the model never generated")
        cut = len(tokens.ids) - len(tokens.mask)
        info: dict[str, float | None] = {"prove/total": float(scored.total), "prove/best": float(scored.best),
                                         "prove/calls": float(len(played.rollout.calls))}
        for name, score in scored.scores.items():
            info[f"prove/{name}"] = float(score.value) if score.applies else None
        extra = {**tokens.extra, "turn_scores": [], "tool_rewards": [], "reward_extra_info": info,
                 "prove_rollout_id": played.rollout.id}
        return AgentLoopOutput(
            prompt_ids=tokens.ids[:cut],
            response_ids=tokens.ids[cut:][: self.response_length],
            response_mask=tokens.mask[: self.response_length],
            response_logprobs=tokens.logprobs[: self.response_length] if tokens.logprobs else None,
            reward_score=float(scored.total),
            num_turns=num_turns(played.messages),
            metrics=AgentLoopMetrics(generate_sequences=tokens.generate_seconds, tool_calls=policy.tool_seconds,
                                     compute_score=timing.get("compute_score", 0.0),
                                     num_preempted=tokens.num_preempted if tokens.num_preempted is not None else -1),
            extra_fields=extra,
        )


def num_turns(messages: list[dict[str, Any]]) -> int:
    """Chat turns as verl counts them: user and assistant turns, and each round of tool results as one."""
    count, previous = 0, None
    for message in messages:
        role = message.get("role")
        if role != "system" and not (role == "tool" and previous == "tool"):
            count += 1
        previous = role
    return count


async def _in_own_thread(loop: asyncio.AbstractEventLoop, fn: Callable[[], _T], *, name: str) -> _T:
    """``fn()`` in a new thread; its result (or exception) when it ends."""
    done: asyncio.Future[_T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the event loop is gone
            pass

    done.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even when nobody awaits
    threading.Thread(target=work, name=name, daemon=True).start()
    return await done
