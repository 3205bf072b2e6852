"""Bundled LLM-backed components over any OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp
server, a hosted API): the ``llm`` graph labeller and the ``llm`` teacher.

Both are configured by ``[synth.llm]`` (base URL, model, API-key variable). Model output is
never trusted as is: labels must be valid JSON naming real tools and are then verified live
like the schema labeller's; the teacher rewrites each turn the programmatic teacher drafted and
keeps a rewrite only when the guards of ``plugins/synth/guards.py`` find every fact in it
supported by the conversation, none of the draft's facts lost, the language and the episode's
outcome unchanged; otherwise it asks again (``max_retries``) and then keeps the draft.

Requests are retried with exponential backoff on timeouts, connection errors and HTTP 5xx/429
(``request_retries``, ``backoff_s``). An endpoint still failing after that raises
``EndpointUnavailable`` and stops the run, which a rerun resumes where it stopped
(``on_endpoint_failure = "stop"``), or leaves that conversation's drafted text in place
(``"template"``, counted in the synthesis stats as ``teacher.endpoint_fallbacks``).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any, Literal

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.runtime import Environment, example_at
from prove_core.errors import RequestFailed
from prove_core.model import Example, Message
from prove_core.synth.graph import Edge, ToolGraph, schema_hash
from prove_plugins.synth.graph import REJECTED
from prove_plugins.synth.guards import Problem, check_turn, language, last_results, strip_reasoning
from prove_plugins.synth.teacher import ProgrammaticTeacher
from prove_plugins.train.models.clients import post_json

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class LLMConfig:
    """``[synth.llm]``: where the OpenAI-compatible endpoint is and how to treat it.

    ``max_retries``: how often an unusable text is asked for again before the draft is kept;
    ``request_retries`` / ``backoff_s``: how often a failed request (timeout, connection error,
    HTTP 5xx or 429) is sent again, after ``backoff_s``, then twice as long each time;
    ``on_endpoint_failure``: what an endpoint still failing after that does to the run —
    ``"stop"`` raises ``EndpointUnavailable`` (a rerun resumes), ``"template"`` keeps that
    conversation's drafted text and skips the endpoint for ``cooldown_s``."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; none needed for local servers
    temperature: float = 0.7
    timeout_s: float = attrs.field(default=60.0, validator=attrs.validators.gt(0))
    max_retries: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    request_retries: int = attrs.field(default=4, validator=attrs.validators.ge(0))
    backoff_s: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    on_endpoint_failure: Literal["stop", "template"] = attrs.field(
        default="stop", validator=attrs.validators.in_(("stop", "template")))
    cooldown_s: float = attrs.field(default=60.0, validator=attrs.validators.ge(0))


class EndpointUnavailable(RequestFailed):
    """The LLM endpoint kept failing after its retries. Examples already written stay; run
    ``prove synth`` again once the endpoint is back and it continues where it stopped."""


class ChatClient:
    """A minimal client for ``POST {base_url}/chat/completions`` (no SDK dependency); replies come
    back without their reasoning blocks."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None) -> str:
        cfg = self.config
        body = {"model": cfg.model, "messages": messages,
                "temperature": cfg.temperature if temperature is None else temperature}
        try:
            payload = post_json(cfg.base_url.rstrip("/") + "/chat/completions", body, api_key_env=cfg.api_key_env,
                                timeout_s=cfg.timeout_s, retries=cfg.request_retries, backoff_s=cfg.backoff_s)
        except RequestFailed as exc:
            tries = cfg.request_retries + 1 if exc.status is None or exc.status >= 500 or exc.status == 429 else 1
            raise EndpointUnavailable(
                f"LLM endpoint {cfg.base_url} failed after {tries} attempt(s): {str(exc).split(' failed: ', 1)[-1]}; "
                "examples already written are kept — run `prove synth` again once it answers and it continues "
                "where it stopped (or set [synth.llm] on_endpoint_failure = \"template\")", status=exc.status) from None
        try:
            return strip_reasoning(payload["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            raise EndpointUnavailable(f"LLM endpoint {cfg.base_url} returned no choices") from None


def _json_block(text: str) -> Any:
    """The first JSON value in a reply (models wrap JSON in prose or code fences)."""
    match = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidate = match.group(1) if match else text
    start = min((i for i in (candidate.find("["), candidate.find("{")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON in reply")
    return json.JSONDecoder().raw_decode(candidate[start:])[0]


LABEL_PROMPT = """You label dependencies between the tools of one service.
Source tool A:
{source}
For every target tool B below, answer whether B depends on A:
- "explicit": a value A returns (usually an id) is a required argument of B; give that argument as "param";
- "implicit": A must run first to set up state that B needs;
- "none": otherwise.
Targets:
{targets}
Reply with only a JSON list: [{{"target": "...", "label": "explicit|implicit|none", "param": "...", "evidence": "..."}}]"""


@attrs.frozen(kw_only=True)
class LLMLabellerConfig:
    """``llm``: the endpoint (``[synth.llm]``); ``verify`` (``[synth] verify_edges``): check every
    labelled edge on a live session."""

    llm: LLMConfig = attrs.field(factory=LLMConfig)
    verify: bool = True


class LLMLabeller:
    """Asks the model to label pairs, one request per source tool, then verifies edges live."""

    name = "llm"
    description = "Label tool pairs by asking an LLM (OpenAI-compatible endpoint), verified live."
    Config = LLMLabellerConfig

    def __init__(self, config: LLMLabellerConfig = LLMLabellerConfig()) -> None:
        self.config = config

    @property
    def llm(self) -> LLMConfig:
        return self.config.llm

    def label(self, env: Environment) -> ToolGraph:
        client = ChatClient(self.llm)
        specs = {s.name: s for s in env.specs()}
        edges: list[Edge] = []
        for source in specs.values():
            targets = [s for s in specs.values() if s.name != source.name]
            answer = self._ask(client, source, targets)
            for item in answer:
                target, label = item.get("target"), item.get("label")
                if target not in specs or target == source.name or label not in ("explicit", "implicit"):
                    continue
                param = item.get("param") if label == "explicit" else None
                if param is not None and param not in specs[target].parameters.get("properties", {}):
                    continue  # a hallucinated argument name
                edge = Edge(source=source.name, target=target, label=label, param=param,
                            entity=specs[target].entity_params().get(param) if param else None,
                            evidence=str(item.get("evidence", ""))[:300])
                if self.config.verify:
                    edge = attrs.evolve(edge, verified=self._verify(env, edge))
                edges.append(edge)
        return ToolGraph(schema_hash=schema_hash(specs.values()), tools=list(specs), edges=edges, labeller=self.name)

    def _ask(self, client: ChatClient, source: Any, targets: list[Any]) -> list[dict[str, Any]]:
        prompt = LABEL_PROMPT.format(
            source=json.dumps(source.to_openai()["function"]),
            targets="\n".join(json.dumps(t.to_openai()["function"]) for t in targets))
        for attempt in range(self.llm.max_retries + 1):
            reply = client.complete([{"role": "user", "content": prompt}], temperature=0.0 if attempt == 0 else 0.3)
            try:
                answer = _json_block(reply)
                if isinstance(answer, list) and all(isinstance(a, dict) for a in answer):
                    return answer
            except ValueError:
                pass
            log.info("llm label reply unusable; asking again", source=source.name, attempt=attempt + 1)
        log.warning("llm gave no usable labels; source has no edges", source=source.name)
        return []

    def _verify(self, env: Environment, edge: Edge) -> bool | None:
        """Run A's example, feed each string of its output into B's ``param``; keep the edge if B
        accepts one of them (explicit), or if B's own example is accepted after A (implicit)."""
        runtime = next(iter(env.runtimes.values()))
        prefix = env.public_name(runtime.name, "")  # "<server>_" when names are prefixed, else ""
        a = runtime.server.tools.get(edge.source.removeprefix(prefix))
        b = runtime.server.tools.get(edge.target.removeprefix(prefix))
        if a is None or b is None or not a.examples or not b.examples:
            return None
        sid = runtime.new_session()
        try:
            try:
                b_args, a_args = example_at(b, runtime, sid, 0), example_at(a, runtime, sid, 0)
            except Exception:  # noqa: BLE001
                return None
            out = runtime.call(sid, a.name, a_args)
            if out.is_error:
                return False
            if edge.label == "implicit":
                return not (result := runtime.call(sid, b.name, b_args)).is_error or result.code not in REJECTED
            values = [v for v in _strings(out.data)][:20]
            for value in values:
                result = runtime.call(sid, b.name, {**b_args, edge.param: value})
                if not (result.is_error and result.code in REJECTED):
                    return True
            return False
        finally:
            runtime.close(sid)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


REWRITE_PROMPT = """You help write a training conversation between a user and an assistant that acts through tools.
The conversation so far:
{transcript}

Write the next {role} message in your own words{style}. This draft says what it must say:
{draft}

Keep every id, number, amount, date, time, name and quoted title exactly as the draft or the conversation writes it;
add no fact of your own; keep its meaning ({meaning}); write in the conversation's language.
Reply with the message only."""
AGAIN = "\n\nYour last version was refused: {problems}. Write it again."


@attrs.frozen(kw_only=True)
class LLMTeacherConfig:
    """``llm``: the endpoint (``[synth.llm]``)."""

    llm: LLMConfig = attrs.field(factory=LLMConfig)


class LLMTeacher(ProgrammaticTeacher):
    """Puts a drafted conversation into a model's words, turn by turn; the calls still come from
    the live plan and every drafted turn is the reference its rewrite is checked against.

    The pipeline drafts with the programmatic teacher's methods (inherited), then calls
    ``rewrite`` on each conversation before replay validation. What happened is recorded in the
    example's ``task.meta["teacher"]`` and summed in the synthesis stats."""

    name = "llm"
    description = "Teacher whose user and assistant text comes from an LLM (OpenAI-compatible endpoint), guarded."
    Config = LLMTeacherConfig

    def __init__(self, config: LLMTeacherConfig = LLMTeacherConfig()) -> None:
        super().__init__(config)
        self.config: LLMTeacherConfig = config
        self._skip_until = 0.0  # the endpoint failed: drafts are kept until then (on_endpoint_failure = "template")

    @property
    def llm(self) -> LLMConfig:
        return self.config.llm

    def rewrite(self, example: Example) -> Example:
        """The example with each text turn rewritten where a rewrite passes the guards."""
        tally: Counter[str] = Counter()
        if time.monotonic() < self._skip_until:
            return _noted(example, tally, fallback=True)
        try:
            messages = self._rewrite(example, tally)
        except EndpointUnavailable as exc:
            if self.llm.on_endpoint_failure == "stop":
                raise
            log.warning("llm endpoint down; keeping the drafted text", example=example.id, error=str(exc))
            self._skip_until = time.monotonic() + self.llm.cooldown_s
            return _noted(example, Counter(), fallback=True)
        return _noted(attrs.evolve(example, messages=messages), tally, fallback=False)

    def _rewrite(self, example: Example, tally: Counter[str]) -> list[Message]:
        client = ChatClient(self.llm)
        drafts = [m.content for m in example.messages if m.role in ("user", "assistant") and m.content]
        conversation_language = language(" ".join(drafts))
        style = example.task.meta.get("persona")
        out: list[Message] = []
        for message in example.messages:
            if message.role in ("user", "assistant") and message.content and not message.tool_calls:
                before = [m.to_openai() for m in out]
                text = self._turn(client, message.role, message.content, before, conversation_language,
                                  style if message.role == "user" else None, tally)
                message = attrs.evolve(message, content=text)
            out.append(message)
        return out

    def _turn(self, client: ChatClient, role: str, draft: str, before: list[dict[str, Any]], lang: str | None,
              style: str | None, tally: Counter[str]) -> str:
        meaning = ("what the user asks for, not its opposite" if role == "user" else
                   "say that the call failed" if any(last_results(before)) else "what the results say, nothing more")
        prompt = REWRITE_PROMPT.format(transcript=_transcript(before), role=role, draft=draft, meaning=meaning,
                                       style=f", in the voice of a {style} user" if style else "")
        problems: list[Problem] = []
        for attempt in range(self.llm.max_retries + 1):
            ask = prompt if not problems else prompt + AGAIN.format(problems="; ".join(map(str, problems)))
            text = client.complete([{"role": "user", "content": ask}]).strip()
            problems = check_turn(text, draft, role, before, language_of_conversation=lang)
            if not problems:
                tally["rewritten"] += 1
                return text
            tally.update(f"rejected:{p.kind}" for p in problems)
            log.debug("llm text refused", role=role, attempt=attempt + 1, problems=[str(p) for p in problems])
        tally["kept_draft"] += 1
        return draft


def _transcript(messages: list[dict[str, Any]], limit: int = 6000) -> str:
    """The conversation as the model reads it (the system prompt aside), its end kept when long."""
    lines = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in m["tool_calls"])
            lines.append(f"assistant calls {calls}")
        elif m["role"] == "tool":
            lines.append(f"tool {m.get('name', '')} returns {(m.get('content') or '')[:1500]}")
        else:
            lines.append(f"{m['role']}: {m.get('content') or ''}")
    text = "\n".join(lines) or "(nothing yet: this is the first message)"
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _noted(example: Example, tally: Counter[str], *, fallback: bool) -> Example:
    """The example with what the teacher did recorded in ``task.meta["teacher"]``."""
    note: dict[str, Any] = {"rewritten": tally["rewritten"], "kept_draft": tally["kept_draft"],
                            "rejected": {k.split(":", 1)[1]: v for k, v in sorted(tally.items()) if k.startswith("rejected:")}}
    if fallback:
        note["endpoint_fallback"] = True
    task = attrs.evolve(example.task, meta={**example.task.meta, "teacher": note})
    return attrs.evolve(example, task=task)


@hookimpl
def prove_register_extractors(register):
    register(LLMLabeller)


@hookimpl
def prove_register_teachers(register):
    register(LLMTeacher)
