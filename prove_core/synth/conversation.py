"""The conversation state machine (step 4 of docs/synthesis.md).

One conversation walks five groups of states:

- **query** — pick a stratum (complete 60% / missing a required value 20% / minimal 20%) and a
  persona; the user asks for the first part of the chain, in the words of the tool's ``asks``
  phrasings, naming entities as people do (a name, "the checking account ending 4821") with the
  id they copied from their app;
- **turn** — the assistant answers a user turn: a clarification question when a value is
  missing (the user answers, then the calls follow), else the next tool call;
- **tool execution** — the call runs on a live session; the outcome is ``success`` /
  ``partial`` (no error, empty result) / ``failure``. A failure comes from the world (a business
  rule on the live state) and is recovered the way the paper describes: the assistant explains
  it and the user corrects a value (a retry with corrected parameters), or the assistant gives
  up gracefully with an explanation;
- **response** — the assistant reports the results of the turn in words;
- **continuation** — a follow-up user turn with the next part of the chain, or a clarification
  answer; 2–3 user turns in all (a recovery adds one).

Calls come from the chain and live state, never from the teacher: ids flow from earlier results,
other values are drawn per call (the tool's ``values`` sources, its examples, or values of the
same field in the live state). Every value a call carries was said by the user or returned by an
earlier call; when an earlier result offers several candidates, the user says which one
("the savings account ending 1234"), and an entity the user named is never swapped for another.
The teacher only writes the text.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Protocol

import attrs

from prove_core.config import STRATA, MachineConfig
from prove_core.env.runtime import Environment, ToolResult, example_at
from prove_core.model import Example, GroundTruthCall, Message, Task, ToolCall
from prove_core.synth.graph import Chain, Edge, as_argument, flow_values, flowing_values, schema_hash
from prove_core.synth.quality import skeleton, strings
from prove_core.synth.validation import ID_PATTERN as ID_LIKE
from prove_core.synth.validation import SCHEMA_CODES
from prove_core.toolkit.answers import sensitive_fields, what_answers, words
from prove_core.toolkit.phrasing import draw_value, implied_by_wording, slots, takes_args, templates
from prove_core.toolkit.server import ENTITY_KEY, ToolDef
from prove_core.toolkit.state import Change

# Fields of a record a user may know it by, and look it up with.
LOOKUP_FIELDS = ("name", "full_name", "display_name", "email", "title", "username", "handle", "nickname", "company")
# Fields a person names a record by (see the teacher's descriptions).
DETAIL_FIELDS = (*LOOKUP_FIELDS, "subject", "label", "filename", "headline", "summary", "path")
REDRAWS = 6  # fresh value draws tried when a drawn value is rejected by the tool's schema
PARALLEL_RATE = 0.7  # share of runs of independent calls sent together (parallel calls)
SIBLING_RATE = 0.5  # share of conversations ending in a read that also ask a second read of its record
REPLANS = 3  # fresh phrasings and values tried when a request was incomplete or incoherent
# Failures that say the request was wrong, not the world: never kept (the user would not ask so).
SELF_INFLICTED = {"INVALID_ARGUMENT", "UNKNOWN_TOOL", "NOT_FOUND"}
# Refusals by the live state's business rules: what recovery data is made of.
WORLD_CODES = {"FAILED_PRECONDITION", "CONFLICT", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED"}


class Teacher(Protocol):
    """What the machine asks of a teacher (component kind ``teachers``): the text of every turn.
    The calls, their values and their results never come from it."""

    def persona(self, rng: random.Random) -> str: ...
    def system_prompt(self, servers: list[str], today: str) -> str: ...
    def intent(self, tool: str, values: dict[str, Any], rng: random.Random) -> str: ...
    def render_value(self, value: Any, prop: dict[str, Any], rng: random.Random) -> str: ...
    def refer(self, entity: str, record: dict[str, Any], *, with_id: bool, rng: random.Random) -> str: ...
    def that(self, entity: str, rng: random.Random) -> str: ...
    def vague(self, entity: str, rng: random.Random) -> str: ...
    def user_request(self, intents: list[str], persona: str, minimal: bool, follow_up: bool, rng: random.Random,
                     values: tuple[Any, ...] = ..., context: tuple[str, ...] = ...) -> str: ...
    def clarify_question(self, what: str, rng: random.Random) -> str: ...
    def clarify_answer(self, param: str, value: str, rng: random.Random) -> str: ...
    def report(self, results: list[tuple[str, dict[str, Any]]], rng: random.Random,
               facts: list[Reported] = ..., closing: bool = ...) -> str: ...
    def failure(self, tool: str, error: dict[str, Any], rng: random.Random) -> str: ...
    def already(self, error: dict[str, Any], rng: random.Random) -> str: ...
    def offer_fix(self, error: dict[str, Any], fix: str, rng: random.Random) -> str: ...
    def prerequisite_note(self, error: dict[str, Any], fix: str, rng: random.Random) -> str: ...
    def still_done(self, text: str) -> str: ...
    def recovery_question(self, error: dict[str, Any], what: str, rng: random.Random) -> str: ...
    def correction(self, value: str, rng: random.Random) -> str: ...
    def retry_note(self, error: dict[str, Any], rng: random.Random) -> str: ...
    def irrelevant_request(self, rng: random.Random) -> str: ...
    def decline(self, servers: list[str], rng: random.Random) -> str: ...


@attrs.define
class Step:
    """One planned call: where each argument comes from, and what happened when it ran."""

    id: str
    tool: ToolDef
    public_name: str
    runtime: Any  # the ServerRuntime serving this tool
    fixed: dict[str, Any] = attrs.field(factory=dict)  # values the user states
    alternatives: dict[str, list[Any]] = attrs.field(factory=dict)  # other values the user could state
    refs: dict[str, tuple[int, str]] = attrs.field(factory=dict)  # param -> (earlier step index, entity)
    template: str | None = None  # the user's phrasing of this step
    args: dict[str, Any] = attrs.field(factory=dict)  # resolved at execution
    result: ToolResult | None = None
    records: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # param -> the entity record it names
    described: set[str] = attrs.field(factory=set)  # flowed refs the user must single out
    seen_in: dict[str, str] = attrs.field(factory=dict)  # flowed ref -> the result it came from (JSON)
    flawed: dict[str, Any] | None = None  # a schema-rejected first attempt (marked a mistake)
    flawed_result: ToolResult | None = None
    failed: tuple[dict[str, Any], ToolResult] | None = None  # a failed attempt the user corrected
    corrected: str | None = None  # the parameter the user corrected
    first_ask: tuple[Any, dict[str, Any] | None] | None = None  # its value and record before the correction
    changes: list[Change] = attrs.field(factory=list)  # what the call changed in the session (its records)
    holds: bool = False  # refused because what the user wants is already so (see ConversationMachine.refusal)
    prerequisite: tuple[str, dict[str, Any], ToolResult] | None = None  # a step the refusal named, done first
    offered: str | None = None  # the refusal names a fix the assistant may not do unasked (it offers it)
    call_seed: float = 0.0  # the seed every value source of this call draws with
    needs: set[int] = attrs.field(factory=set)  # indices of the earlier steps this one depends on

    @property
    def ran(self) -> ToolResult:
        """The result of the call; only read once the step has run."""
        if self.result is None:
            raise AttributeError(f"step {self.id} ({self.tool.name}) has no result: it has not run")
        return self.result


@attrs.frozen(kw_only=True)
class Reported:
    """One successful call of a turn, as the reply reports it (``Teacher.report``'s ``facts``):
    the fields of its result that answer the request (``prove_core.toolkit.answers``), the
    records it changed, and the fields never to repeat."""

    tool: str
    data: Any
    args: dict[str, Any]  # the call's arguments
    read_only: bool
    answers: tuple[str, ...]  # fields of the result (of each listed record, for a listing)
    listing: str | None  # the list field, when the result is a listing
    changes: tuple[Change, ...]
    hidden: frozenset[str]
    entity: str | None  # the kind of record it reads first
    verb: str  # the first word of the tool's name
    seen: str = ""  # the conversation's tool results and call arguments so far: what a reply may state


@attrs.frozen(kw_only=True)
class Drafted:
    example: Example
    clarification: Example | None
    stratum: str
    chain: str
    outcome: str  # "completed", "recovered" or "gave_up"


def used(step: Any) -> set[str]:
    """The ids a step's user-given arguments already hold (single ids and lists of ids)."""
    out: set[str] = set()
    for value in step.fixed.values():
        out.update(value if isinstance(value, list) else [value])
    return {v for v in out if isinstance(v, str)}


def _entity(tool: ToolDef, param: str) -> str | None:
    entity: str | None = tool.spec.parameters.get("properties", {}).get(param, {}).get(ENTITY_KEY)
    return entity


def _scalar(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


class ConversationMachine:
    def __init__(self, env: Environment, teacher: Teacher, config: MachineConfig, *, seed: int = 0) -> None:
        self.env = env
        self.teacher = teacher
        self.config = config
        self.seed = seed
        self.max_error_rate = 0.3  # the replay's drop threshold: kept failures stay within it
        self.max_chain_length = 5  # a lookup in front never makes a chain longer than this
        # One server, or several mounted together (tool names then carry `<server>_` prefixes,
        # exactly as `prove serve a b` publishes them); a mounted group shares one seed.
        self.servers = sorted(env.runtimes)
        self.task_seed = next(iter(env.runtimes.values())).seed
        self.tools_openai = [s.to_openai() for s in env.specs()]
        self.schema_hash = schema_hash(env.specs())
        self._examples: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._field_values: dict[tuple[str, str], list[Any]] = {}
        self._lookup_tools: dict[tuple[str, str], list[ToolDef]] = {}
        self._lookup_args_cache: dict[tuple[str, str, str], dict[str, Any] | None] = {}
        self._repeats: dict[tuple[str, str], dict[str, set[str]]] = {}
        sid = env.new_session()
        self.initial_hash = env.state_hash(sid)
        self.today = next(iter(env.runtimes.values())).state(sid).today().isoformat()
        env.close(sid)
        # the seed state, built apart from any session: value sources read it, nothing writes it
        self._seed_states = {name: rt.server.build_state(rt.seed, rt.options) for name, rt in env.runtimes.items()}
        self.label = "+".join(self.servers)
        self.seed_options: dict[str, Any] = {}  # the servers' seed options, recorded in every task

    def in_seed(self, rt: Any, record_id: Any) -> bool:
        """Whether ``record_id`` exists in the seed state (else a call of this conversation made it)."""
        tables = self._seed_states[rt.name]._tables  # noqa: SLF001 - read only
        return isinstance(record_id, str) and any(record_id in table for table in tables.values())

    def _meta(self, **meta: Any) -> dict[str, Any]:
        """Task meta with what scoring needs without the original config: the seed options and
        the hash of the tool schemas the example was made with."""
        return {**meta, "seed_options": self.seed_options, "schema_hash": self.schema_hash}

    # -- values --------------------------------------------------------------------------------
    def _examples_of(self, tool: ToolDef, rt: Any) -> list[dict[str, Any]]:
        """The tool's examples on the seed state (cached: the seed is fixed)."""
        key = (rt.name, tool.name)
        if key not in self._examples:
            found = []
            sid = rt.new_session()
            try:
                for i in range(len(tool.examples)):
                    try:
                        found.append(example_at(tool, rt, sid, i))
                    except Exception:  # noqa: BLE001 - an example that does not apply to this seed
                        continue
            finally:
                rt.close(sid)
            self._examples[key] = found
        return self._examples[key]

    def _state_values(self, rt: Any, param: str, prop: dict[str, Any]) -> list[Any]:
        """Values stored under a field of the same name anywhere in the seed state, of the
        parameter's type: real names, amounts and notes instead of one constant."""
        key = (rt.name, param)
        if key not in self._field_values:
            kinds: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float)}
            python = kinds.get(prop.get("type", ""))  # no type: no values
            state = self._seed_states[rt.name]
            tables = state._tables  # noqa: SLF001 - the seed state is read, never written
            values: set[Any] = set()
            if python is not None:
                for table in tables.values():
                    for record in table.values():
                        value = record.get(param) if isinstance(record, dict) else None
                        if isinstance(value, python) and not isinstance(value, bool):
                            values.add(abs(value) if isinstance(value, int | float) else value)
            self._field_values[key] = sorted(values, key=repr)[:400]
        return self._field_values[key]

    def _draw(self, step: Step, param: str, prop: dict[str, Any], rng: random.Random,
              call_seed: float | None = None, args: dict[str, Any] | None = None) -> Any:
        """A value the user could choose for a non-entity parameter, drawn for this call. Value
        sources of one call get generators with the same seed (``call_seed``), so related fields
        can agree."""
        tool, rt = step.tool, step.runtime
        source = tool.values.get(param)
        if source is not None:
            return draw_value(source, random.Random(call_seed if call_seed is not None else rng.random()),
                              self._seed_states[rt.name], args)
        examples = [e[param] for e in self._examples_of(tool, rt) if param in e]
        if "enum" in prop and rng.random() < 0.5:
            return rng.choice(prop["enum"])
        pool = self._state_values(rt, param, prop)
        if pool and rng.random() < 0.5:
            candidate = rng.choice(pool)
            if self._valid(step.tool, {**(self._examples_of(tool, rt) or [{}])[0], param: candidate}):
                return candidate
        if examples:
            return rng.choice(examples)
        if "enum" in prop:
            return rng.choice(prop["enum"])
        return None

    @staticmethod
    def _valid(tool: ToolDef, args: dict[str, Any]) -> bool:
        """Whether the tool's schema accepts ``args``."""
        try:
            tool.validate(args)
        except Exception:  # noqa: BLE001 - fastjsonschema's error: the schema rejects it
            return False
        return True

    # -- planning ------------------------------------------------------------------------------
    def plan(self, chain: Chain, context: Any, rng: random.Random,
             forced: dict[int, dict[str, Any]] | None = None) -> list[Step]:
        steps: list[Step] = []
        chosen: list[dict[str, Any]] = []  # sampled records so far: later picks should belong with them
        for i in range(len(chain.tools)):
            steps.append(self._plan_step(chain, i, steps, context, rng, chosen, (forced or {}).get(i)))
        return steps

    # -- looking an entity up by what the user calls it ------------------------------------------
    def _with_lookup(self, chain: Chain, first: Step, rng: random.Random) -> tuple[Chain, dict[int, dict[str, Any]]] | None:
        """``chain`` with a read-only lookup in front that finds, from what the user says (a name,
        an e-mail), an entity the first call needs; and the lookup's arguments."""
        params = [(p, entity) for p in sorted(first.fixed) if p in first.records and (entity := _entity(first.tool, p))]
        rng.shuffle(params)
        rt = first.runtime
        for param, entity in params:
            record = first.records[param]
            for tool in self._lookups(rt, entity, first.tool.name):
                if self.env.public_name(rt.name, tool.name) in chain.tools:
                    continue  # the chain already calls it: one more would only skew the corpus
                args = self._lookup_args(rt, tool, entity, record)
                if args is None:
                    continue
                public = self.env.public_name(rt.name, tool.name)
                edge = Edge(source=public, target=chain.tools[0], label="explicit", entity=entity, param=param,
                            evidence=f"the user names the {entity}; {tool.name} finds its id", verified=True)
                return Chain(tools=[public, *chain.tools], edges=[edge, *chain.edges]), {0: args}
        return None

    def _lookups(self, rt: Any, entity: str, besides: str) -> list[ToolDef]:
        """Read-only tools of ``rt`` that need no entity id and return ``entity`` records."""
        key = (rt.name, entity)
        if key not in self._lookup_tools:
            found = []
            for tool in rt.server.tools.values():
                spec = tool.spec
                required = spec.parameters.get("required", [])
                if spec.annotations.read_only and entity in spec.reads and not spec.entity_params().keys() & set(required):
                    found.append(tool)
            self._lookup_tools[key] = found
        return [t for t in self._lookup_tools[key] if t.name != besides]

    def _lookup_args(self, rt: Any, tool: ToolDef, entity: str, record: dict[str, Any]) -> dict[str, Any] | None:
        """Arguments a user could give ``tool`` (the record's name, part of it, its e-mail) with
        which its result on the seed state holds the record; None when none do."""
        key = (rt.name, tool.name, str(record.get("id")))
        if key in self._lookup_args_cache:
            return self._lookup_args_cache[key]
        props = tool.spec.parameters.get("properties", {})
        required = tool.spec.parameters.get("required", [])
        texts = [p for p in required if props.get(p, {}).get("type") == "string" and "enum" not in props[p]]
        found = None
        if len(texts) == len(required) <= 1:
            words = [v for k, v in record.items() if isinstance(v, str) and k in LOOKUP_FIELDS]
            words += [w for v in list(words) for w in v.split()[1:] if len(w) > 2]
            trials = [{texts[0]: w} for w in dict.fromkeys(words)] if texts else [{}]
            sid = rt.new_session()
            try:
                for args in trials:
                    if not self._valid(tool, args):
                        continue
                    result = rt.call(sid, tool.name, args)
                    if not result.is_error and record.get("id") in flowing_values(rt, sid, entity, "", result.data):
                        found = args
                        break
            finally:
                rt.close(sid)
        self._lookup_args_cache[key] = found
        return found

    def _plan_step(self, chain: Chain, i: int, steps: list[Step], context: Any, rng: random.Random,
                   chosen: list[dict[str, Any]], forced: dict[str, Any] | None = None) -> Step:
        """Step ``i``: its phrasing first, then a value for every parameter the phrasing (or the
        schema) needs: from an earlier result, a sampled entity, or a drawn value."""
        public = chain.tools[i]
        rt, local = self.env.route(public)
        tool = rt.server.tools[local]
        params = tool.spec.parameters
        props = params.get("properties", {})
        required = set(params.get("required", []))
        step = Step(id=f"s{i + 1}", tool=tool, public_name=public, runtime=rt)
        examples = self._examples_of(tool, rt)
        draft: dict[str, Any] = {}
        call_seed = step.call_seed = rng.random()
        for name, prop in props.items():
            if name in required or any(name in e for e in examples) or not prop.get(ENTITY_KEY):
                draft[name] = self._draw(step, name, prop, rng, call_seed) if not prop.get(ENTITY_KEY) else f"<{name}>"
        draft = {k: v for k, v in draft.items() if v is not None}
        draft.update(forced or {})
        phrasings = self._phrasings(tool, draft)
        if forced:  # the user says the forced values: only phrasings that carry them
            phrasings = [t for t in phrasings if set(forced) <= set(slots(t))] or phrasings
        step.template = rng.choice(phrasings) if phrasings else None
        mentioned = set(slots(step.template)) if step.template else None
        if mentioned is not None and callable(tool.asks):
            # an optional value the wording depends on ("mark it unread") stays in the call
            for name in sorted(set(draft) - mentioned - required):
                if not props[name].get(ENTITY_KEY) and \
                        step.template not in self._phrasings(tool, {k: v for k, v in draft.items() if k != name}):
                    mentioned.add(name)
        for name, prop in props.items():
            entity = prop.get(ENTITY_KEY)
            if name not in required:
                wanted = (name in mentioned) if mentioned is not None else \
                    (any(name in e for e in examples) and rng.random() < self.config.optional_arg_rate)
                if not wanted:
                    continue
            flow = self._flow_source(chain, i, name)
            source = self._earlier_source(steps, entity, name, chain, i) if entity else None
            if flow is not None:
                step.refs[name] = flow
            elif source is not None:
                step.refs[name] = (source, entity)
            elif entity and [c for c in context.candidates(rt.name, entity) if c["id"] not in used(step)]:
                # two parameters of one call never get the same entity (no transfer to itself)
                pool = [c for c in context.candidates(rt.name, entity) if c["id"] not in used(step)]
                record = _coherent_choice(pool, chosen, rng)
                chosen.append(record)
                step.fixed[name] = as_argument(prop, record["id"])
                step.records[name] = record
                others = [c for c in pool if c["id"] != record["id"]]
                rng.shuffle(others)
                step.alternatives[name] = [as_argument(prop, c["id"]) for c in others[: self.config.alternatives]]
            elif entity:
                example = next((e[name] for e in examples if name in e), None)
                if example is not None:
                    step.fixed[name] = example
            elif draft.get(name) is not None:
                step.fixed[name] = draft[name]
                step.alternatives[name] = [v for v in (self._draw(step, name, prop, rng) for _ in range(4))
                                           if v is not None and v != draft[name]]
        self._fit_values(step, step.fixed)
        return step

    def _fit_values(self, step: Step, args: dict[str, Any]) -> dict[str, Any]:
        """Redraw the values whose sources depend on the call's other arguments (a limit price
        near the chosen symbol's quote, a category that fits the merchant) now that those are
        known; the user says the redrawn values. A source returning None leaves its value out."""
        props = step.tool.spec.parameters.get("properties", {})
        fitted = dict(args)
        for name in props:
            source = step.tool.values.get(name)
            if name not in step.fixed or source is None or not takes_args(source) or props[name].get(ENTITY_KEY):
                continue
            known = {k: v for k, v in fitted.items() if k != name}
            value = draw_value(source, random.Random(step.call_seed), self._seed_states[step.runtime.name], known)
            if value is None:
                fitted.pop(name, None)
                step.fixed.pop(name, None)
            else:
                fitted[name] = step.fixed[name] = value
        return fitted

    def _phrasings(self, tool: ToolDef, args: dict[str, Any]) -> list[str]:
        try:
            return templates(tool, args)
        except Exception:  # noqa: BLE001 - a phrasing callable that cannot handle these values
            return []

    def _earlier_source(self, steps: list[Step], entity: str, param: str, chain: Chain, i: int) -> int | None:
        if i > 0:
            edge = chain.edges[i - 1]
            if edge.label == "explicit" and edge.entity == entity and edge.param == param:
                return i - 1
        for j in range(len(steps) - 1, -1, -1):
            spec = steps[j].tool.spec
            if entity in set(spec.reads) | set(spec.produces) | set(spec.mutates):
                return j
        return None

    @staticmethod
    def _flow_source(chain: Chain, i: int, param: str) -> tuple[int, str] | None:
        """A value that flows in from the previous step of another server (an e-mail, a time)."""
        if i > 0:
            edge = chain.edges[i - 1]
            if edge.flow is not None and edge.param == param:
                return (i - 1, f"flow:{edge.flow}")
        return None

    # -- execution -----------------------------------------------------------------------------
    def execute(self, steps: list[Step], rng: random.Random, chain: Chain | None = None,
                context: Any = None) -> tuple[str, list[Step], str]:
        """Run the plan on a fresh session; returns (outcome, executed steps, session id)."""
        env = self.env
        sid = env.new_session()
        done: list[Step] = []
        outcome = "completed"
        errors = calls = 0
        for i in range(len(steps)):
            before = steps[i].runtime.state(sid).snapshot()  # what the step changed is reported from it
            # a refused first ask adds one failed call to the planned ones; it must fit the budget
            may_fail = (errors + 1) / (len(steps) + errors + 1) <= self.max_error_rate
            step = self._run_step(steps, i, sid, rng, may_fail=may_fail)
            for _ in range(REPLANS):
                if chain is None or not (step.ran.is_error and step.ran.code in SELF_INFLICTED):
                    break
                # the request itself was incomplete or incoherent (a missing detail, someone
                # else's account): the user would have asked differently
                steps[i] = self._plan_step(chain, i, steps[:i], context, rng, [])
                step = self._run_step(steps, i, sid, rng, may_fail=may_fail)
            calls += 1
            if step.failed is not None:  # the user first asked for something the world refused
                errors += 1
                calls += 1
                outcome = "recovered"
            if step.ran.is_error and step.ran.code in SELF_INFLICTED:
                self._find_working_values(step, sid)
                if step.ran.is_error:
                    if len(done) >= 2:  # the conversation is the part that can be asked for
                        return outcome, done, sid
                    env.close(sid)
                    raise Unusable(f"{step.tool.name}: no request the user could make succeeds "
                                   f"({step.ran.code}/{(step.ran.error or {}).get('reason')})",
                                   reason="no_valid_request")
            if step.ran.is_error:
                # a business rule of the live state refused it: keep it (the assistant recovers or
                # gives up) while the conversation stays within the replay's error budget
                within = (errors + 1) / (calls + 1) <= self.max_error_rate
                keep = within and rng.random() < self.config.failure_rate
                kind = self.refusal(step) if keep else "refusal"
                if kind == "holds":  # what the user wants is already so: said, not retried
                    step.holds = True
                    errors += 1
                    outcome = "already"
                elif kind == "prerequisite" and self._do_prerequisite(step, sid):
                    outcome = "recovered"
                    errors += 1
                    calls += 2
                elif kind == "correctable" and rng.random() < self.config.recovery_rate and self._recover(step, sid, rng):
                    outcome = "recovered"
                    errors += 1
                    calls += 1
                elif not keep or (errors + 1) / calls > self.max_error_rate:
                    self._find_working_values(step, sid)
                    if step.ran.is_error:
                        if len(done) >= 2:  # end the conversation before the refusal
                            return outcome, done, sid
                        env.close(sid)
                        raise Unusable(f"{step.tool.name}: every request is refused "
                                       f"({step.ran.code}/{(step.ran.error or {}).get('reason')}) and too "
                                       "few calls come before it to keep the refusal", reason="unavoidable_failure")
                else:
                    errors += 1
            if rng.random() < self.config.retry_rate and not step.ran.is_error and \
                    (errors + 1) / (calls + 1) <= self.max_error_rate:
                # A schema-rejected first attempt changes nothing, so it can be made after the
                # real call and still stand before it in the conversation.
                step.flawed = self._flaw(step, rng)
                if step.flawed is not None:
                    step.flawed_result = env.call(sid, step.public_name, step.flawed)
                    if step.flawed_result.code not in SCHEMA_CODES:
                        step.flawed = step.flawed_result = None
                    else:
                        errors += 1
                        calls += 1
            done.append(step)
            step.changes = step.runtime.state(sid).changes_since(before)
            if step.ran.is_error and self.config.give_up_on_failure:
                return ("already" if step.holds else "gave_up"), done, sid
        return outcome, done, sid

    def _run_step(self, steps: list[Step], i: int, sid: str, rng: random.Random, *, may_fail: bool = False) -> Step:
        """Resolve step ``i``'s arguments (ids flowing from earlier results) and call it."""
        env, step = self.env, steps[i]
        named: dict[str, set[str]] = {}
        for earlier in steps[: i + 1]:  # the entities the user has named by now
            for param, value in earlier.fixed.items():
                entity = _entity(earlier.tool, param)
                if entity:
                    named.setdefault(entity, set()).update(v for v in (value if isinstance(value, list) else [value]))
        args = dict(step.fixed)
        for param, (j, entity) in step.refs.items():
            source = steps[j].result
            if source is None or source.is_error:  # unreachable: a failure stops the run first
                env.close(sid)
                raise Unusable(f"{step.tool.name} needs the result of a failed call")
            taken = {x for v in args.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)}
            if entity.startswith("flow:"):
                ids = [x for x in flow_values(entity[5:], source.data) if x not in taken]
            else:
                ids = [x for x in flowing_values(steps[j].runtime, sid, entity, param, source.data) if x not in taken]
            ids = list(dict.fromkeys(ids))
            if not ids:
                env.close(sid)
                raise Unusable(f"no {entity} value flowed from {steps[j].tool.name} to {step.tool.name}",
                               reason="id_did_not_flow")
            # An entity the user named is never swapped for another one of its kind; one the request
            # does not mention ("the offers I've sent") is the one the user named (themselves).
            mine = [x for x in ids if x in named.get(entity, ())]
            unspoken = step.template is not None and param not in slots(step.template)
            if not mine and unspoken and len(named.get(entity, ())) == 1:
                mine = sorted(named[entity])
            if mine:
                ids = mine
            table = self._table(step.runtime, sid, entity)
            if table is not None:  # prefer the record that belongs with the call's other values
                ids.sort(key=lambda rid: -_affinity(table.find(rid) or {}, args))
            prop = step.tool.spec.parameters["properties"][param]
            args[param] = as_argument(prop, ids[0])
            if table is not None:
                step.records[param] = dict(table.find(ids[0]) or {"id": ids[0]})
            step.seen_in[param] = json.dumps(source.data, ensure_ascii=False)
            if len(ids) > 1 or (named.get(entity) and ids[0] not in named[entity]):
                # the user says which one they mean: one of several, or another than they named before
                step.described.add(param)
                step.alternatives[param] = [as_argument(prop, x) for x in ids[1: 1 + self.config.alternatives]]
        if step.refs:  # the ids that flowed in are known now: values that belong with them follow
            args = self._fit_values(step, args)
        step.args = args
        step.failed = step.corrected = step.first_ask = None
        if may_fail and rng.random() < self.config.world_failure_rate:
            self._first_ask_refused(step, sid, rng)  # before the real call: a refusal changes nothing
        step.result = env.call(sid, step.public_name, args)
        if step.result.is_error and step.failed is not None:
            step.failed = step.corrected = step.first_ask = None  # the recovery must end in success
        if step.result.is_error and step.result.code in SCHEMA_CODES:
            self._redraw(step, sid, rng)  # our own drawn value was malformed: the user says another
        return step

    @staticmethod
    def _table(rt: Any, sid: str, entity: str) -> Any:
        tables = {t.entity: name for name, t in rt.server.state_type._table_specs.items()}  # noqa: SLF001
        return getattr(rt.state(sid), tables[entity]) if entity in tables else None

    def _redraw(self, step: Step, sid: str, rng: random.Random) -> None:
        """Draw other values for the user-chosen (non-entity) arguments until the schema accepts
        them; the user is then written as saying those."""
        props = step.tool.spec.parameters.get("properties", {})
        free = [p for p in step.fixed if not props.get(p, {}).get(ENTITY_KEY)]
        for _ in range(REDRAWS if free else 0):
            trial = dict(step.args)
            call_seed = rng.random()
            for param in free:
                value = self._draw(step, param, props[param], rng, call_seed)
                if value is not None:
                    trial[param] = value
            result = self.env.call(sid, step.public_name, trial)
            if result.code not in SCHEMA_CODES:
                step.fixed.update({p: trial[p] for p in free})
                step.args, step.result = trial, result
                return

    def _candidates(self, step: Step, *, correction: bool = False) -> list[tuple[str, Any]]:
        """(param, value) pairs the user could say instead: other entities they own, other
        amounts or names (never an earlier result's id the user did not single out).

        A ``correction`` (the user changes a value after a refusal) keeps the request's target
        and meaning: a write never moves to another record (deleting another event because this
        one is refused is not a recovery), and a yes/no or choice value never flips (the user
        asked to unfreeze; freezing instead inverts the request)."""
        props = step.tool.spec.parameters.get("properties", {})
        out = []
        for param, others in step.alternatives.items():
            if not (param in step.fixed or param in step.described):
                continue
            if correction:
                prop = props.get(param, {})
                if prop.get(ENTITY_KEY) and not step.tool.spec.annotations.read_only:
                    continue
                if "enum" in prop or prop.get("type") == "boolean" or "enum" in prop.get("items", {}):
                    continue
            out += [(param, v) for v in others]
        return out

    # -- refusals by what they mean --------------------------------------------------------------
    def refusal(self, step: Step) -> str:
        """What a business-rule refusal means for the conversation: ``holds`` (what the user
        wants is already so: the refusal a repeat of a successful call gets), ``prerequisite``
        (the message names a step to take first), ``correctable`` (a value the user may change
        without changing the request's target or meaning), else ``refusal``."""
        error = step.ran.error or {}
        reason, message = str(error.get("reason") or ""), str(error.get("message") or "")
        shapes = self._repeat_refusals(step.tool, step.runtime).get(reason)
        if shapes is not None and (skeleton(message, ()) in shapes or re.search(r"\balready\b", message, re.I)):
            return "holds"
        if _fix_clause(message) is not None:
            return "prerequisite"
        return "correctable" if self._candidates(step, correction=True) else "refusal"

    def _repeat_refusals(self, tool: ToolDef, rt: Any) -> dict[str, set[str]]:
        """Reasons (with their message shapes) with which ``tool`` refuses the repeat of a call
        that just succeeded: its way of saying "that is already so". Learned from its examples on
        the seed; a tool that is not idempotent only counts refusals that say it (ALREADY, EXISTS)."""
        key = (rt.name, tool.name)
        if key not in self._repeats:
            found: dict[str, set[str]] = {}
            if not tool.spec.annotations.read_only:
                for i in range(len(tool.examples)):
                    sid = rt.new_session()
                    try:
                        args = example_at(tool, rt, sid, i)
                        if rt.call(sid, tool.name, args).is_error:
                            continue
                        again = rt.call(sid, tool.name, args)
                    except Exception:  # noqa: BLE001 - an example that does not apply to this seed
                        continue
                    finally:
                        rt.close(sid)
                    reason = str((again.error or {}).get("reason") or "")
                    if again.is_error and reason and (tool.spec.annotations.idempotent
                                                       or re.search(r"ALREADY|EXIST|DUPLICATE", reason)):
                        found.setdefault(reason, set()).add(skeleton(str(again.error.get("message", "")), ()))
            self._repeats[key] = found
        return self._repeats[key]

    def _do_prerequisite(self, step: Step, sid: str) -> bool:
        """The refusal names a step to take first ("verify the payee first"): take it when an
        offered tool does it with the request's own values and deletes nothing, then retry; else
        the assistant offers it (``step.offered``). True when the retry succeeded."""
        error = step.ran.error or {}
        clause = _fix_clause(str(error.get("message") or ""))
        if clause is None:
            return False
        step.offered = clause
        rt = step.runtime
        clause_words = words(clause)
        entities = {e: step.args[p] for p, e in step.tool.spec.entity_params().items() if p in step.args}
        for tool in rt.server.tools.values():
            verb, *rest = tool.name.split("_")
            if tool is step.tool or verb not in clause_words or tool.spec.annotations.read_only:
                continue
            if tool.spec.annotations.destructive or not (words(" ".join(rest)) & (clause_words | set(entities))):
                continue
            props = tool.spec.parameters.get("properties", {})
            args = {}
            for name, prop in props.items():
                if name in step.args:
                    args[name] = step.args[name]
                elif prop.get(ENTITY_KEY) in entities:
                    args[name] = entities[prop[ENTITY_KEY]]
            if set(tool.spec.parameters.get("required", [])) - set(args) or not self._valid(tool, args):
                continue
            state = rt.state(sid)
            before = state.snapshot()
            public = self.env.public_name(rt.name, tool.name)
            done = self.env.call(sid, public, args)
            if done.is_error:
                continue
            retry = self.env.call(sid, step.public_name, step.args)
            if retry.is_error:
                state.restore(before)
                continue
            step.failed, step.corrected = (dict(step.args), step.ran), None
            step.prerequisite = (public, args, done)
            step.result, step.offered = retry, None
            return True
        return False

    def _find_working_values(self, step: Step, sid: str) -> None:
        """Before any text exists, let the user's request be one that succeeds: try the other
        values they could have asked for (a failed call changes nothing, so trying is free)."""
        for param, candidate in self._candidates(step):
            trial = {**step.args, param: candidate}
            result = self.env.call(sid, step.public_name, trial)
            if not result.is_error:
                self._take(step, param, candidate, sid)
                step.args, step.result = trial, result
                return

    def _first_ask_refused(self, step: Step, sid: str, rng: random.Random) -> None:
        """Let the user first ask for something the live state refuses (the frozen account, more
        than is available) and then correct it to what the plan holds: recovery data whose
        failure comes from the world."""
        candidates = self._candidates(step, correction=True)
        rng.shuffle(candidates)
        state = step.runtime.state(sid)
        for param, candidate in candidates[:8]:
            trial = {**step.args, param: candidate}
            before = state.snapshot()
            result = self.env.call(sid, step.public_name, trial)
            if not result.is_error:
                state.restore(before)  # only a refusal may stand before the real call
                continue
            if result.code in WORLD_CODES and self.refusal(attrs.evolve(step, result=result)) == "correctable":
                entity = _entity(step.tool, param)
                table = self._table(step.runtime, sid, entity) if entity else None
                record = dict(table.find(_scalar(candidate)) or {"id": _scalar(candidate)}) if table is not None else None
                step.failed, step.corrected, step.first_ask = (trial, result), param, (candidate, record)
                return

    def _recover(self, step: Step, sid: str, rng: random.Random) -> bool:
        """Keep the failure in the conversation, followed by the user's correction and a retry
        that succeeds; False when no correction the user could make succeeds."""
        candidates = self._candidates(step, correction=True)
        rng.shuffle(candidates)
        for param, candidate in candidates:
            trial = {**step.args, param: candidate}
            result = self.env.call(sid, step.public_name, trial)
            if not result.is_error:
                step.failed = (dict(step.args), step.ran)
                step.corrected = param
                step.first_ask = (step.args[param], step.records.get(param))
                self._take(step, param, candidate, sid)
                step.args, step.result = trial, result
                return True
        return False

    def _take(self, step: Step, param: str, value: Any, sid: str) -> None:
        """Record ``value`` as what the user says for ``param`` (and its entity record)."""
        if param in step.fixed:
            step.fixed[param] = value
        entity = _entity(step.tool, param)
        table = self._table(step.runtime, sid, entity) if entity else None
        if table is not None:
            step.records[param] = dict(table.find(_scalar(value)) or {"id": _scalar(value)})

    def _flaw(self, step: Step, rng: random.Random) -> dict[str, Any] | None:
        """A plausible slip the schema rejects: a required value left out, or a number sent as
        words. Marked as a mistake in the example (kept out of the training loss)."""
        props = step.tool.spec.parameters.get("properties", {})
        required = [p for p in step.tool.spec.parameters.get("required", []) if p in step.args]
        if not required:
            return None
        param = rng.choice(required)
        flawed = dict(step.args)
        if props.get(param, {}).get("type") in ("number", "integer") and rng.random() < 0.5:
            flawed[param] = f"{flawed[param]} dollars" if "amount" in param else f"about {flawed[param]}"
        else:
            del flawed[param]
        return flawed

    # -- writing -------------------------------------------------------------------------------
    def draft(self, chain: Chain, context: Any, index: int, example_id: str) -> Drafted:
        rng = random.Random(f"{self.seed}:{self.label}:{index}")
        stratum = rng.choices(STRATA, weights=[self.config.strata.get(s, 0.0) for s in STRATA])[0]
        persona = self.teacher.persona(rng)
        steps = self.plan(chain, context, rng)
        # (in the missing stratum the user leaves the entity out altogether, so there is nothing to look up)
        if rng.random() < self.config.lookup_rate and len(chain.tools) < self.max_chain_length and stratum != "missing":
            looked_up = self._with_lookup(chain, steps[0], rng)
            if looked_up is not None:  # the user names the entity; the assistant looks it up first
                chain, forced = looked_up
                steps = self.plan(chain, context, rng, forced=forced)
        sibling = self._sibling(steps, chain, rng) if rng.random() < SIBLING_RATE else None
        if sibling is not None:  # a second read of the same record, asked for with the last one
            step, edge = sibling
            steps.append(step)
            chain = Chain(tools=[*chain.tools, step.public_name], edges=[*chain.edges, edge])
        outcome, done, sid = self.execute(steps, rng, chain, context)
        self.env.close(sid)
        if not done:
            raise Unusable("the first call could not be planned")
        undone = _undoes(done)
        if undone:  # one goal per conversation: nobody creates a meeting to cancel it a turn later
            raise Unusable(undone, reason="incoherent_goal")
        turns = self._split(len(done), rng, glued=len(steps) - 1 if sibling is not None else None)
        withheld = self._withheld(done[turns[0][0]:turns[0][1]], rng) if stratum == "missing" else None
        if stratum == "missing" and withheld is None:
            stratum = "complete"  # nothing the user could leave out: an ordinary request
        writer = _Writer(self, rng, persona, stratum)
        for i, step in enumerate(done):  # what each call needs first: the calls it may not run beside
            step.needs = {j for j, _ in step.refs.values()} | ({i - 1} if i > 0 and chain.edges[i - 1].label == "implicit"
                                                                else set())
        clarification = None
        for t, (start, end) in enumerate(turns):
            turn_steps = done[start:end]
            writer.user_turn(turn_steps, follow_up=t > 0, withheld=withheld if t == 0 else None)
            if t == 0 and withheld is not None:
                k, param = withheld
                writer.clarify(turn_steps[k], param)
                clarification = Example(
                    id=f"{example_id}-clarify", messages=list(writer.messages), tools=self.tools_openai,
                    task=Task(servers=self.servers, seed=self.task_seed, calls=[], expected="clarify",
                              initial_state_hash=self.initial_hash,
                              meta=self._meta(stratum="missing", withheld=param, chain=chain.key,
                                              conversation=example_id)),
                )
                writer.answer(turn_steps[k], param)
            if not writer.run_turn(turn_steps):
                break  # gave up: the conversation ends with the failure explained
        calls: list[GroundTruthCall] = []
        for i, step in enumerate(done):
            if step.ran.is_error:
                continue
            deps = sorted({done[j].id for j, _ in step.refs.values()} |
                          ({done[i - 1].id} if i > 0 and chain.edges[i - 1].label == "implicit" else set()))
            deps = [d for d in deps if d in {c.id for c in calls}]
            if step.prerequisite is not None:  # the step the refusal named, taken before the retry
                public, pre_args, _ = step.prerequisite
                calls.append(GroundTruthCall(id=f"{step.id}p", tool=public, arguments=pre_args, depends_on=deps))
                deps = [*deps, f"{step.id}p"]
            calls.append(GroundTruthCall(id=step.id, tool=step.public_name, arguments=step.args, depends_on=deps))
        task = Task(
            servers=self.servers, seed=self.task_seed, calls=calls, expected="call",
            initial_state_hash=self.initial_hash,
            meta=self._meta(stratum=stratum, persona=persona, chain=chain.key, outcome=outcome, conversation=example_id,
                            user_turns=sum(1 for m in writer.messages if m.role == "user"),
                            turns=[[s.id for s in done[a:b]] for a, b in turns],
                            mistakes=sum(1 for m in writer.messages if m.mistake)),
        )
        example = Example(id=example_id, messages=writer.messages, tools=self.tools_openai, task=task)
        return Drafted(example=example, clarification=clarification, stratum=stratum, chain=chain.key, outcome=outcome)

    def _sibling(self, steps: list[Step], chain: Chain, rng: random.Random) -> tuple[Step, Edge] | None:
        """Another read of the record the last (read-only) step reads, by a tool of the same
        server that needs nothing else: the two do not depend on each other, so the assistant may
        call them together (parallel calls)."""
        last = steps[-1]
        if not last.tool.spec.annotations.read_only or len(steps) >= self.max_chain_length:
            return None
        rt = last.runtime
        named = [(p, e) for p, e in last.tool.spec.entity_params().items() if p in last.fixed or p in last.refs]
        options = []
        for param, entity in named:
            for tool in rt.server.tools.values():
                public = self.env.public_name(rt.name, tool.name)
                spec = tool.spec
                required = spec.parameters.get("required", [])
                takes = [q for q, e in spec.entity_params().items() if e == entity and q in required]
                if tool is last.tool or public in chain.tools or not spec.annotations.read_only or not tool.asks \
                        or len(takes) != 1 or len(required) != 1:
                    continue
                options.append((param, entity, tool, public, takes[0]))
        if not options:
            return None
        param, entity, tool, public, target = rng.choice(options)
        step = Step(id=f"s{len(steps) + 1}", tool=tool, public_name=public, runtime=rt, call_seed=rng.random())
        if param in last.fixed:
            step.fixed[target] = last.fixed[param]
            if param in last.records:
                step.records[target] = last.records[param]
        else:
            step.refs[target] = last.refs[param]
        phrasings = self._phrasings(tool, {target: f"<{target}>"})
        step.template = rng.choice(phrasings) if phrasings else None
        edge = Edge(source=last.public_name, target=public, label="none", entity=entity, param=target,
                    evidence="reads the same record as the call before it", verified=True)
        return step, edge

    def _withheld(self, steps: list[Step], rng: random.Random) -> tuple[int, str] | None:
        """The value the user leaves out of the first request (the step and parameter): an entity
        they name only when the assistant asks."""
        options = []
        for k, step in enumerate(steps):
            required = step.tool.spec.parameters.get("required", [])
            # another call of the request naming the same entity would give it away
            elsewhere = [v for j, other in enumerate(steps) if j != k for v in other.args.values()]
            options += [(k, p) for p in required if p in step.fixed and _entity(step.tool, p) and p in step.records
                        and p != step.corrected  # the value the user later corrects is in the first request
                        and step.fixed[p] not in elsewhere]
        return rng.choice(options) if options else None

    def _split(self, n: int, rng: random.Random, glued: int | None = None) -> list[tuple[int, int]]:
        """The user turns: ``n`` calls cut into runs; never a cut before step ``glued`` (a read
        asked for together with the one before it)."""
        places = [k for k in range(1, n) if k != glued]
        turns = min(len(places) + 1, rng.choice(self.config.user_turns))
        cuts = sorted(rng.sample(places, turns - 1)) if turns > 1 else []
        bounds = [0, *cuts, n]
        return list(zip(bounds, bounds[1:]))

    def abstention(self, index: int, example_id: str) -> Example:
        rng = random.Random(f"{self.seed}:{self.label}:abstain:{index}")
        messages = [
            Message(role="system", content=self.teacher.system_prompt(self.servers, self.today)),
            Message(role="user", content=self.teacher.irrelevant_request(rng)),
            Message(role="assistant", content=self.teacher.decline(self.servers, rng)),
        ]
        task = Task(servers=self.servers, seed=self.task_seed, calls=[], expected="abstain",
                    initial_state_hash=self.initial_hash, meta=self._meta(source="irrelevance", conversation=example_id))
        return Example(id=example_id, messages=messages, tools=self.tools_openai, task=task)




class _Batch(list):  # type: ignore[type-arg]
    """Steps sent in one assistant message."""

    parallel = False


class _Writer:
    """Puts an executed plan into words, message by message."""

    def __init__(self, machine: ConversationMachine, rng: random.Random, persona: str, stratum: str) -> None:
        self.machine, self.teacher, self.rng = machine, machine.teacher, rng
        self.persona, self.stratum = persona, stratum
        self.messages = [Message(role="system", content=self.teacher.system_prompt(machine.servers, machine.today))]
        self.spoken: set[str] = set()  # ids the user has said
        self.call_no = 0
        self.changed = False  # a call of an earlier turn changed something

    # user side
    def _render(self, step: Step, param: str, value: Any, *, withheld: bool = False, fresh: bool = False) -> str:
        entity = _entity(step.tool, param)
        teacher = self.teacher
        if entity is None:
            prop = step.tool.spec.parameters["properties"].get(param, {})
            return teacher.render_value(value, prop, self.rng)
        if withheld:
            return teacher.vague(entity, self.rng)
        record = step.records.get(param, {"id": _scalar(value)})
        if param in step.refs and not fresh:
            ids = value if isinstance(value, list) else [value]
            if param in step.described and not _shown_with_details(record, step.seen_in.get(param, "")):
                if not self.machine.in_seed(step.runtime, _scalar(value)):
                    return teacher.that(entity, self.rng)  # made in this conversation: "that payee"
                # the result lists it without a name the user could use: they copy its id
                self.spoken.update(v for v in ids if isinstance(v, str))
                return teacher.refer(entity, record, with_id=True, rng=self.rng)
            if param in step.described or not all(v in self.spoken for v in ids) and self.rng.random() < 0.5:
                # the user singles it out, or names a record they have not mentioned yet
                self.spoken.update(v for v in ids if isinstance(v, str))
                text = teacher.refer(entity, record, with_id=False, rng=self.rng)
                seen = step.seen_in.get(param)
                if seen is not None and not _names_shown(text, record, seen):
                    # the detail they name is not one the result shows ("Aisha Castillo" for the
                    # seller "aisha_cast39"): they copy the id, so the assistant can tell
                    text = teacher.refer(entity, record, with_id=True, rng=self.rng)
                return text
            return teacher.that(entity, self.rng)
        ids = value if isinstance(value, list) else [value]
        if not fresh and all(v in self.spoken for v in ids) and self.rng.random() < 0.7:
            return teacher.that(entity, self.rng)
        self.spoken.update(v for v in ids if isinstance(v, str))
        return teacher.refer(entity, record, with_id=True, rng=self.rng)

    def _phrase(self, step: Step, withheld: str | None) -> tuple[str, list[str], list[Any]]:
        """The step's task phrase, context sentences for entities it does not mention, and the
        values the user gives in it (for an LLM teacher's check)."""
        if step.failed is not None and step.corrected is not None and step.first_ask is not None:
            # the request named what the failed attempt used; the correction comes later
            value, record = step.first_ask
            step = attrs.evolve(step, args=dict(step.failed[0]), fixed={**step.fixed, step.corrected: value}
                                if step.corrected in step.fixed else step.fixed,
                                records={**step.records, **({step.corrected: record} if record else {})})
        said = {k: v for k, v in step.args.items() if k in step.fixed or k in step.refs}
        if step.template is not None and not set(slots(step.template)) <= set(said):
            # a slot the plan could not fill (an optional value with no source): another phrasing
            stated = {k for k in step.fixed if not _entity(step.tool, k)} - implied_by_wording(step.tool)
            fitting = [t for t in self.machine._phrasings(step.tool, step.args)
                       if set(slots(t)) <= set(said) and (stated <= set(slots(t)) or callable(step.tool.asks))]
            step = attrs.evolve(step, template=self.rng.choice(fitting) if fitting else None)
        context, values = [], []
        if step.template is None:  # a tool without phrasings: the teacher's generic wording
            spoken = {k: v for k, v in step.fixed.items() if k != withheld}
            values = [v for v in spoken.values()]
            return self.teacher.intent(step.public_name, spoken, self.rng), [], values
        rendered = {}
        for param in slots(step.template):
            value = said.get(param)
            rendered[param] = self._render(step, param, value, withheld=param == withheld) if param in said else ""
            if param in step.fixed and param != withheld:
                values.append(step.fixed[param])
        for param in sorted(step.described & set(step.refs) - set(rendered)):
            # an earlier result offered several: the user says which one, though the wording has no slot for it
            if param != withheld and param in step.args:
                context.append(self._render(step, param, step.args[param]))
        for param, value in step.fixed.items():
            if param in rendered or param == withheld or not _entity(step.tool, param):
                continue
            if all(v in self.spoken for v in (value if isinstance(value, list) else [value])):
                continue
            context.append(self._render(step, param, value))
            values.append(value)
        return step.template.format_map(rendered), context, values

    def user_turn(self, steps: list[Step], *, follow_up: bool, withheld: tuple[int, str] | None) -> None:
        intents, context, values = [], [], []
        for k, step in enumerate(steps):
            phrase, ctx, vals = self._phrase(step, withheld[1] if withheld and withheld[0] == k else None)
            intents.append(phrase)
            context += ctx
            values += vals
        self.messages.append(Message(role="user", content=self.teacher.user_request(
            intents, self.persona, self.stratum == "minimal", follow_up, self.rng, values=tuple(values),
            context=tuple(dict.fromkeys(context)))))

    def clarify(self, step: Step, param: str) -> str:
        question = self.teacher.clarify_question(_entity(step.tool, param) or param, self.rng)
        self.messages.append(Message(role="assistant", content=question))
        return question

    def answer(self, step: Step, param: str) -> None:
        text = self._render(step, param, step.fixed[param], fresh=True)  # the answer names it in full
        self.messages.append(Message(role="user", content=self.teacher.clarify_answer(param, text, self.rng)))

    # assistant side
    def _call(self, name: str, args: dict[str, Any], result: ToolResult, *, mistake: bool = False) -> None:
        self.call_no += 1
        call_id = f"call_{self.call_no}"
        self.messages += [
            Message(role="assistant", content=None, tool_calls=[ToolCall(id=call_id, name=name, arguments=args)],
                    mistake=mistake),
            Message(role="tool", content=json.dumps(result.structured, sort_keys=True, ensure_ascii=False),
                    tool_call_id=call_id, name=name),
        ]

    def _batches(self, steps: list[Step]) -> list[list[Step]]:
        """The turn's steps in the assistant messages that call them: independent calls that went
        through plainly (no slip, refusal or prerequisite) are sometimes sent together, as
        parallel calls, the way real traces do."""
        batches: list[list[Step]] = []
        index = {id(s): int(s.id[1:]) - 1 for s in steps}  # a step's place in the conversation (its needs)
        for step in steps:
            plain = step.flawed is None and step.failed is None and step.result is not None \
                and not step.result.is_error
            last = batches[-1] if batches else None
            if last is not None and plain and getattr(last, "parallel", False) and \
                    not step.needs & {index[id(s)] for s in last}:
                last.append(step)
                continue
            batch = _Batch([step])
            batch.parallel = plain and self.rng.random() < PARALLEL_RATE
            batches.append(batch)
        return batches

    def _call_together(self, steps: list[Step]) -> None:
        """Independent calls in one assistant message, their results after it in the same order."""
        calls, results = [], []
        for step in steps:
            self.call_no += 1
            call_id = f"call_{self.call_no}"
            calls.append(ToolCall(id=call_id, name=step.public_name, arguments=step.args))
            results.append(Message(role="tool", content=json.dumps(step.ran.structured, sort_keys=True, ensure_ascii=False),
                                   tool_call_id=call_id, name=step.public_name))
        self.messages += [Message(role="assistant", content=None, tool_calls=calls), *results]

    def run_turn(self, steps: list[Step]) -> bool:
        """The assistant's calls and words for one user turn; False when it gave up."""
        reported: list[tuple[str, dict[str, Any]]] = []
        facts: list[Reported] = []
        request = next((m.content or "" for m in reversed(self.messages) if m.role == "user"), "")
        for batch in self._batches(steps):
            if len(batch) > 1:
                self._call_together(batch)
                for step in batch:
                    reported.append((step.public_name, step.ran.structured))
                    facts.append(self._reported(step, request))
                continue
            step = batch[0]
            if step.prerequisite is not None and step.failed is not None:
                args, failed = step.failed
                self._call(step.public_name, args, failed)
                public, pre_args, pre_result = step.prerequisite
                self.messages.append(Message(role="assistant", content=self.teacher.prerequisite_note(
                    failed.error or {}, str(step.offered or _fix_clause(str((failed.error or {}).get("message", ""))) or ""),
                    self.rng)))
                self._call(public, pre_args, pre_result)
            if step.flawed is not None and step.flawed_result is not None:
                self._call(step.public_name, step.flawed, step.flawed_result, mistake=True)
                self.messages.append(Message(role="assistant",
                                             content=self.teacher.retry_note(step.flawed_result.error or {}, self.rng)))
            if step.failed is not None and step.corrected is not None:
                args, result = step.failed
                self._call(step.public_name, args, result)
                entity = _entity(step.tool, step.corrected)
                what = entity or step.corrected
                self.messages.append(Message(role="assistant", content=self.teacher.recovery_question(
                    result.error or {}, what, self.rng)))
                text = self._render(step, step.corrected, step.args[step.corrected], fresh=True)
                self.messages.append(Message(role="user", content=self.teacher.correction(text, self.rng)))
            result = step.ran
            self._call(step.public_name, step.args, result)
            if result.error is not None:
                if step.holds:
                    text = self.teacher.already(result.error, self.rng)
                elif step.offered:
                    text = self.teacher.offer_fix(result.error, step.offered, self.rng)
                else:
                    text = self.teacher.failure(step.public_name, result.error, self.rng)
                if self.changed or any(not f.read_only for f in facts):
                    text = self.teacher.still_done(text)  # a write went through: never "nothing was changed"
                if facts:  # what the turn's calls found and changed, from the state, before the refusal
                    text = self.teacher.report(reported, self.rng, facts=facts, closing=False) + " " + text
                self.messages.append(Message(role="assistant", content=text))
                return False
            reported.append((step.public_name, result.structured))  # a success's structured content is its data
            facts.append(self._reported(step, request))
        self.changed = self.changed or any(f.changes for f in facts)
        self.messages.append(Message(role="assistant", content=self.teacher.report(reported, self.rng, facts=facts)))
        return True

    def _reported(self, step: Step, request: str) -> Reported:
        """One successful call as the reply reports it: the fields that answer the request, or
        the records it changed."""
        data = step.ran.structured
        given = [v for v in step.args.values() if not isinstance(v, list | dict)]
        listing, records, fields = what_answers(step.tool, data, request, given)
        read_only = step.tool.spec.annotations.read_only
        if read_only:
            answers = tuple(fields)
        else:  # a write is reported by what it changed, plus what its tool declares its result tells
            answers = tuple(k for k in step.tool.answers if records and k in records[0])
        entity = next(iter(step.tool.spec.reads), None)
        return Reported(tool=step.public_name, data=data, args=dict(step.args), read_only=read_only,
                        answers=answers, listing=listing, changes=tuple(step.changes),
                        hidden=sensitive_fields(step.tool), entity=entity,
                        verb=step.tool.name.split("_")[0],
                        seen=self._seen())

    def _seen(self) -> str:
        """What a reply may state as fact: the conversation's tool results and call arguments (the
        episode a reward checks a reply against)."""
        parts = [m.content or "" for m in self.messages if m.role == "tool"]
        parts += [json.dumps(c.arguments, ensure_ascii=False) for m in self.messages for c in m.tool_calls]
        return "\n".join(parts)


_FIX = re.compile(r"(?:^|[;:,(—]\s*|\.\s+)((?:[^;:,.()—]|\.(?=\d))*?\bfirst)\s*(?:$|[.;,)!])", re.I)


def _fix_clause(message: str) -> str | None:
    """The step a refusal names to take first ("verify the payee first"), or None."""
    match = _FIX.search(message)
    if match is None:
        return None
    clause = match.group(1).strip()
    return clause if len(clause.split()) >= 2 else None


# Verbs whose second undoes the first on the same record: a conversation that does both has no goal.
INVERSES = {("create", "delete"), ("add", "remove"), ("add", "delete"), ("reserve", "cancel"), ("book", "cancel"),
            ("schedule", "cancel"), ("follow", "unfollow"), ("block", "unblock"), ("join", "leave"),
            ("archive", "unarchive"), ("label", "unlabel"), ("pin", "unpin"), ("star", "unstar"), ("mute", "unmute"),
            ("lock", "unlock"), ("freeze", "unfreeze"), ("subscribe", "unsubscribe"), ("like", "unlike"),
            ("watch", "unwatch"), ("enable", "disable"), ("save", "unsave"), ("post", "delete"), ("comment", "delete"),
            ("invite", "remove"), ("place", "cancel"), ("start", "stop"), ("open", "close"), ("leave", "join"),
            ("archive", "restore"), ("delete", "restore"), ("create", "cancel")}


def _undoes(steps: list[Step]) -> str | None:
    """Why a later call undoes an earlier one on the same record (inverse verbs, or one tool
    with a yes/no value flipped), or None."""
    done = [s for s in steps if s.result is not None and not s.result.is_error]
    for i, first in enumerate(done):
        touched = {v for v in [*strings(first.args), *strings(first.ran.data)] if ID_LIKE.fullmatch(v)}
        for later in done[i + 1:]:
            same = touched & {v for v in strings(later.args) if ID_LIKE.fullmatch(v)}
            if not same:
                continue
            a, b = first.tool.name.split("_")[0], later.tool.name.split("_")[0]
            flipped = first.tool is later.tool and any(isinstance(v, bool) and later.args.get(k) is (not v)
                                                        for k, v in first.args.items())
            if (a, b) in INVERSES or flipped:
                return f"{later.tool.name} undoes {first.tool.name} on {sorted(same)[0]}"
    return None


def _names_shown(text: str, record: dict[str, Any], result_text: str) -> bool:
    """Whether ``text`` names the record by a detail that ``result_text`` shows beside the
    record's id, in one object (a name shown elsewhere in the result does not tie it to the id)."""
    rid = record.get("id")
    named = {v for v in record.values() if isinstance(v, str) and len(v) >= 3 and v != rid and v in text}
    if not named:
        return False
    try:
        data = json.loads(result_text)
    except ValueError:
        return False
    todo = [data]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            values = set(v for v in value.values() if isinstance(v, str))
            if rid in values and named & values:
                return True
            todo += list(value.values())
        elif isinstance(value, list):
            todo += value
    return False


def _shown_with_details(record: dict[str, Any], result_text: str) -> bool:
    """Whether a result shows the record with a detail a person names it by (its name, title,
    last four digits), so "the savings account ending 1234" singles it out for the assistant."""
    details = [v for k, v in record.items() if isinstance(v, str) and len(v) >= 3 and v != record.get("id")
               and (k in DETAIL_FIELDS or k.endswith("last4"))]
    return any(json.dumps(d, ensure_ascii=False) in result_text for d in details)


def _affinity(record: dict[str, Any], values: Any) -> int:
    """How many of ``values`` (ids) the record refers to, or is referred to by."""
    wanted = {v for v in (values.values() if isinstance(values, dict) else values) if isinstance(v, str)}
    own = {v for v in record.values() if isinstance(v, str)}
    return len(wanted & own)


def _coherent_choice(candidates: list[dict[str, Any]], chosen: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """A random candidate among those most linked to the records already chosen."""
    if not chosen:
        return rng.choice(candidates)
    linked = {v for r in chosen for v in r.values() if isinstance(v, str)} | {r["id"] for r in chosen}
    scores = [_affinity(c, linked) + (c["id"] in linked) for c in candidates]
    best = max(scores)
    return rng.choice([c for c, score in zip(candidates, scores) if score == best])


class Unusable(Exception):
    """This chain could not become a conversation (an id did not flow, every request the user
    could make is refused); the pipeline counts it under ``reason``."""

    def __init__(self, message: str, *, reason: str = "unusable") -> None:
        super().__init__(message)
        self.reason = reason
