"""Bundled LLM-backed components over any OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp
server, a hosted API): the ``llm`` graph labeller and the ``llm`` teacher.

Both are configured by ``[synth.llm]`` (base URL, model, API-key variable). Model output is
never trusted as is: labels must be valid JSON naming real tools and are then verified live
like the schema labeller's; teacher text must mention every value the call needs and no id
that does not exist, or it is regenerated (and after ``max_retries`` the programmatic
teacher's text is used, so synthesis never stops on a bad generation).
"""

from __future__ import annotations

import json
import os
import random
import re
import urllib.error
import urllib.request
from typing import Any

import attrs
import structlog

from prove_core import hookimpl
from prove_core.env.runtime import Environment, example_at
from prove_core.errors import ProveError
from prove_core.synth.graph import Edge, ToolGraph, schema_hash
from prove_core.synth.validation import ID_PATTERN
from prove_plugins.synth.graph import REJECTED
from prove_plugins.synth.teacher import ProgrammaticTeacher

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class LLMConfig:
    """``[synth.llm]``: where the OpenAI-compatible endpoint is."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; none needed for local servers
    temperature: float = 0.7
    timeout_s: float = attrs.field(default=60.0, validator=attrs.validators.gt(0))
    max_retries: int = attrs.field(default=3, validator=attrs.validators.ge(0))


class ChatClient:
    """A minimal client for ``POST {base_url}/chat/completions`` (no SDK dependency)."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None) -> str:
        body = json.dumps({"model": self.config.model, "messages": messages,
                           "temperature": self.config.temperature if temperature is None else temperature}).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.config.base_url.rstrip("/") + "/chat/completions", data=body,
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
            raise ProveError(f"LLM endpoint {self.config.base_url} failed: {exc}") from None
        try:
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ProveError(f"LLM endpoint {self.config.base_url} returned no choices") from None


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


USER_PROMPT = """Write one message from a user to an assistant that can use tools. Persona: {persona}.
The user wants to: {intents}.
{values}Write only the message, in the persona's voice, one or two sentences."""
REPORT_PROMPT = """You are an assistant. Summarise these tool results for the user in one or two sentences;
quote ids and amounts exactly as they appear:
{results}"""


@attrs.frozen(kw_only=True)
class LLMTeacherConfig:
    """``llm``: the endpoint (``[synth.llm]``)."""

    llm: LLMConfig = attrs.field(factory=LLMConfig)


class LLMTeacher(ProgrammaticTeacher):
    """Writes user and assistant text with an LLM; the calls still come from the live plan.

    A user message must contain every value the plan says the user gives (else the assistant
    could not know it) and no id-like token that does not exist; a report must not invent ids.
    Unusable text is regenerated, then replaced by the programmatic template."""

    name = "llm"
    description = "Teacher whose user and assistant text comes from an LLM (OpenAI-compatible endpoint)."
    Config = LLMTeacherConfig

    def __init__(self, config: LLMTeacherConfig = LLMTeacherConfig()) -> None:
        super().__init__(config)
        self.config: LLMTeacherConfig = config

    @property
    def llm(self) -> LLMConfig:
        return self.config.llm

    def _generate(self, prompt: str, ok: Any, fallback: str) -> str:
        client = ChatClient(self.llm)
        for _ in range(self.llm.max_retries + 1):
            text = client.complete([{"role": "user", "content": prompt}]).strip()
            if text and ok(text):
                return text
        log.info("llm text unusable; using the template")
        return fallback

    def user_request(self, intents: list[str], persona: str, minimal: bool, follow_up: bool, rng: Any,
                     values: tuple[Any, ...] = (), context: tuple[str, ...] = ()) -> str:
        fallback = super().user_request(intents, persona, minimal, follow_up, rng, values, context)
        # every value the user gives must be in the message, as the calls will carry it
        mentioned = [self.render_value(x, {}, random.Random(0)) for v in values for x in (v if isinstance(v, list) else [v])]
        intents = [*intents, *(f"(about {c})" for c in context)]
        prompt = USER_PROMPT.format(
            persona=("terse" if minimal else persona) + (", continuing the conversation" if follow_up else ""),
            intents="; ".join(intents),
            values=("It must contain these values exactly: " + ", ".join(mentioned) + "\n") if mentioned else "")
        allowed = set(mentioned)
        return self._generate(
            prompt,
            lambda text: all(m in text for m in mentioned) and all(t in allowed for t in ID_PATTERN.findall(text)),
            fallback)

    def report(self, results: list[tuple[str, dict[str, Any]]], rng: Any, facts: Any = (), closing: bool = True) -> str:
        fallback = super().report(results, rng, facts=facts, closing=closing)
        blob = json.dumps([{"tool": t, "result": r} for t, r in results])[:6000]
        known = set(ID_PATTERN.findall(blob))
        return self._generate(REPORT_PROMPT.format(results=blob),
                              lambda text: all(t in known for t in ID_PATTERN.findall(text)), fallback)


@hookimpl
def prove_register_extractors(register):
    register(LLMLabeller)


@hookimpl
def prove_register_teachers(register):
    register(LLMTeacher)
