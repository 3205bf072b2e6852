"""The conversation state machine (DESIGN §1.2 step 4).

One conversation walks five groups of states:

- **query** — pick a stratum (complete 60% / missing a required value 20% / minimal 20%) and a
  persona; the user asks for the first part of the chain;
- **turn** — the assistant answers a user turn: a clarification question when a value is
  missing, else the next tool call;
- **tool execution** — the call runs on a live session; the outcome is classified
  ``success`` / ``partial`` (no error, empty result) / ``failure``; recovery is a retry with
  corrected arguments, a switch to another tool, or giving up gracefully;
- **response** — the assistant reports the results of the turn in words;
- **continuation** — end, a follow-up user turn with the next part of the chain, or a
  clarification answer; 2–3 user turns in all.

Calls come from the chain and live state, never from the teacher: ids flow from earlier
results, other values come from sampled entities (which the user mentions) or from the tool's
own example arguments. The teacher only writes the text.
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs

from prove_core.config import STRATA, MachineConfig
from prove_core.graph import Chain, as_argument, flow_values, flowing_values
from prove_core.model import Example, GroundTruthCall, Message, Task, ToolCall
from prove_core.runtime import Environment, ToolResult
from prove_core.testing.conformance import example_at
from prove_core.toolkit.server import ToolDef
from prove_core.validation import SCHEMA_CODES



@attrs.define
class Step:
    """One planned call: where each argument comes from."""

    id: str
    tool: ToolDef
    public_name: str
    runtime: Any  # the ServerRuntime serving this tool
    fixed: dict[str, Any] = attrs.field(factory=dict)  # values the user states (sampled or example)
    alternatives: dict[str, list[str]] = attrs.field(factory=dict)  # other usable ids per parameter
    refs: dict[str, tuple[int, str]] = attrs.field(factory=dict)  # param -> (earlier step index, entity)
    args: dict[str, Any] = attrs.field(factory=dict)  # resolved at execution
    result: ToolResult | None = None
    flawed: dict[str, Any] | None = None  # a rejected first attempt (retry data)
    flawed_result: ToolResult | None = None


@attrs.frozen(kw_only=True)
class Drafted:
    example: Example
    clarification: Example | None
    stratum: str
    chain: str
    outcome: str  # "completed" or "gave_up"


def used(step: Any) -> set[str]:
    """The ids a step's user-given arguments already hold (single ids and lists of ids)."""
    out: set[str] = set()
    for value in step.fixed.values():
        out.update(value if isinstance(value, list) else [value])
    return {v for v in out if isinstance(v, str)}


class ConversationMachine:
    def __init__(self, env: Environment, teacher: Any, config: MachineConfig, *, seed: int = 0) -> None:
        self.env = env
        self.teacher = teacher
        self.config = config
        self.seed = seed
        # One server, or several mounted together (tool names then carry `<server>_` prefixes,
        # exactly as `prove serve a b` publishes them); a mounted group shares one seed.
        self.servers = sorted(env.runtimes)
        self.task_seed = next(iter(env.runtimes.values())).seed
        self.tools_openai = [s.to_openai() for s in env.specs()]
        self._example_cache: dict[tuple[str, str], dict[str, Any]] = {}
        sid = env.new_session()
        self.initial_hash = env.state_hash(sid)
        self.today = next(iter(env.runtimes.values())).state(sid).today().isoformat()
        env.close(sid)
        self.label = "+".join(self.servers)

    # -- planning ------------------------------------------------------------------------------
    def _example(self, tool: ToolDef, rt: Any) -> dict[str, Any]:
        """The tool's first example on a fresh seed state (cached: the seed is fixed)."""
        key = (rt.name, tool.name)
        if key not in self._example_cache:
            sid = rt.new_session()
            try:
                self._example_cache[key] = example_at(tool, rt, sid, 0) if tool.examples else {}
            except Exception:  # noqa: BLE001
                self._example_cache[key] = {}
            finally:
                rt.close(sid)
        return self._example_cache[key]

    def plan(self, chain: Chain, context: Any, rng: random.Random) -> list[Step]:
        steps: list[Step] = []
        chosen: list[dict[str, Any]] = []  # sampled records so far: later picks should belong with them
        for i, public in enumerate(chain.tools):
            rt, local = self.env.route(public)
            tool = rt.server.tools[local]
            example = self._example(tool, rt)
            params = tool.spec.parameters
            required = set(params.get("required", []))
            step = Step(id=f"s{i + 1}", tool=tool, public_name=public, runtime=rt)
            for name, prop in params.get("properties", {}).items():
                entity = prop.get("x-prove-entity")
                if name not in required and not (name in example and rng.random() < self.config.optional_arg_rate):
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
                    others = [c["id"] for c in pool if c["id"] != record["id"]]
                    rng.shuffle(others)
                    step.alternatives[name] = [as_argument(prop, x) for x in others[: self.config.alternatives]]
                elif name in example:
                    step.fixed[name] = example[name]
                elif "enum" in prop:
                    step.fixed[name] = rng.choice(prop["enum"])
            steps.append(step)
        return steps

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
    def execute(self, steps: list[Step], rng: random.Random) -> tuple[str, list[Step], str]:
        """Run the plan on a fresh session; returns (outcome, executed steps, session id)."""
        env = self.env
        sid = env.new_session()
        done: list[Step] = []
        for i, step in enumerate(steps):
            rt = step.runtime
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
                tables = {t.entity: name for name, t in rt.server.state_type._table_specs.items()}
                # prefer an id whose record belongs with the values already in the call
                # (the customer's own account, the card of that account)
                if entity in tables:
                    table = getattr(rt.state(sid), tables[entity])
                    ids.sort(key=lambda rid: -_affinity(table.find(rid) or {}, args))
                if not ids:
                    env.close(sid)
                    raise Unusable(f"no {entity} value flowed from {steps[j].tool.name} to {step.tool.name}")
                prop = step.tool.spec.parameters["properties"][param]
                args[param] = as_argument(prop, ids[0])
                step.alternatives[param] = [as_argument(prop, x) for x in ids[1 : 1 + self.config.alternatives]]
            step.args = args
            step.result = env.call(sid, step.public_name, args)
            if step.result.is_error and step.result.code not in SCHEMA_CODES and rng.random() >= self.config.failure_rate:
                self._find_working_values(step, args, sid)
            if rng.random() < self.config.retry_rate:
                # A schema-rejected first attempt changes nothing, so it can be made after the
                # real call and still stand before it in the conversation.
                step.flawed = self._flaw(step, rng)
                if step.flawed is not None:
                    step.flawed_result = env.call(sid, step.public_name, step.flawed)
                    if step.flawed_result.code not in SCHEMA_CODES:
                        step.flawed = step.flawed_result = None
            done.append(step)
            if step.result.is_error and self.config.give_up_on_failure:
                return "gave_up", done, sid
        return "completed", done, sid

    def _find_working_values(self, step: Step, args: dict[str, Any], sid: str) -> None:
        """Try other candidates (sampled entities for user-given values, other ids of the source
        result for flowing ones) until the call succeeds; a failed call changes nothing, so
        trying is free. Keeps the first success."""
        for param, others in step.alternatives.items():
            for candidate in others:
                trial = {**args, param: candidate}
                result = self.env.call(sid, step.public_name, trial)
                if not result.is_error:
                    if param in step.fixed:
                        step.fixed[param] = candidate
                    step.args, step.result = trial, result
                    return

    def _flaw(self, step: Step, rng: random.Random) -> dict[str, Any] | None:
        """A plausible mistake the schema rejects: a required value dropped or mistyped."""
        required = [p for p in step.tool.spec.parameters.get("required", []) if p in step.args]
        if not required:
            return None
        param = rng.choice(required)
        flawed = dict(step.args)
        if rng.random() < 0.5:
            del flawed[param]
        else:
            flawed[param] = 12345 if isinstance(flawed[param], str) else "not-a-number"
        return flawed

    # -- writing -------------------------------------------------------------------------------
    def draft(self, chain: Chain, context: Any, index: int, example_id: str) -> Drafted:
        rng = random.Random(f"{self.seed}:{self.label}:{index}")
        stratum = rng.choices(STRATA, weights=[self.config.strata.get(s, 0.0) for s in STRATA])[0]
        persona = self.teacher.persona(rng)
        steps = self.plan(chain, context, rng)
        outcome, done, sid = self.execute(steps, rng)
        self.env.close(sid)
        if not done:
            raise Unusable("the first call could not be planned")
        turns = self._split(len(done), rng)
        messages = [Message(role="system", content=self.teacher.system_prompt(self.servers, self.today))]
        clarification = None
        withheld = self._withheld(done[0]) if stratum == "missing" else None
        call_no = 0
        for t, (start, end) in enumerate(turns):
            turn_steps = done[start:end]
            intents, values = [], []
            for step in turn_steps:
                said = {k: v for k, v in step.fixed.items() if not (withheld and step is done[0] and k == withheld)}
                intents.append(self.teacher.intent(step.public_name, said, rng))
                values += [v for k, v in said.items() if step.tool.spec.parameters["properties"].get(k, {}).get("x-prove-entity")]
            messages.append(Message(role="user", content=self.teacher.user_request(
                intents, persona, stratum == "minimal", t > 0, rng, values=tuple(values))))
            if t == 0 and withheld is not None:
                question = self.teacher.clarify_question(withheld, rng)
                prompt = [*messages, Message(role="assistant", content=question)]
                clarification = Example(
                    id=f"{example_id}-clarify", messages=prompt, tools=self.tools_openai,
                    task=Task(servers=self.servers, seed=self.task_seed, calls=[], expected="clarify",
                              meta={"stratum": "missing", "withheld": withheld, "chain": chain.key}),
                )
                messages.append(Message(role="assistant", content=question))
                messages.append(Message(role="user", content=self.teacher.clarify_answer(
                    withheld, done[0].fixed[withheld], rng)))
            reported: list[tuple[str, dict[str, Any]]] = []
            for step in turn_steps:
                if step.flawed is not None and step.flawed_result is not None:
                    call_no += 1
                    messages += self._call_messages(step.public_name, step.flawed, step.flawed_result, call_no)
                    messages.append(Message(role="assistant", content=self.teacher.retry_note(step.flawed_result.error or {}, rng)))
                call_no += 1
                messages += self._call_messages(step.public_name, step.args, step.result, call_no)
                if step.result.is_error:
                    messages.append(Message(role="assistant", content=self.teacher.failure(step.public_name, step.result.error, rng)))
                    break
                reported.append((step.public_name, step.result.data))
            else:
                messages.append(Message(role="assistant", content=self.teacher.report(reported, rng)))
                continue
            break  # gave up: the conversation ends with the failure report
        calls = []
        for i, step in enumerate(done):
            if step.result.is_error:
                continue
            deps = sorted({done[j].id for j, _ in step.refs.values()} |
                          ({done[i - 1].id} if i > 0 and chain.edges[i - 1].label == "implicit" else set()))
            calls.append(GroundTruthCall(id=step.id, tool=step.public_name, arguments=step.args,
                                         depends_on=[d for d in deps if d in {c.id for c in calls}]))
        task = Task(
            servers=self.servers, seed=self.task_seed, calls=calls, expected="call",
            initial_state_hash=self.initial_hash,
            meta={"stratum": stratum, "persona": persona, "chain": chain.key, "outcome": outcome,
                  "user_turns": sum(1 for m in messages if m.role == "user")},
        )
        example = Example(id=example_id, messages=messages, tools=self.tools_openai, task=task)
        return Drafted(example=example, clarification=clarification, stratum=stratum, chain=chain.key, outcome=outcome)

    def _withheld(self, step: Step) -> str | None:
        required = [p for p in step.tool.spec.parameters.get("required", []) if p in step.fixed]
        return required[0] if required else None

    def _split(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        turns = min(n, rng.choice(self.config.user_turns))
        cuts = sorted(rng.sample(range(1, n), turns - 1)) if turns > 1 else []
        bounds = [0, *cuts, n]
        return list(zip(bounds, bounds[1:]))

    def _call_messages(self, name: str, args: dict[str, Any], result: ToolResult, n: int) -> list[Message]:
        call_id = f"call_{n}"
        return [
            Message(role="assistant", content=None, tool_calls=[ToolCall(id=call_id, name=name, arguments=args)]),
            Message(role="tool", content=json.dumps(result.structured, sort_keys=True, ensure_ascii=False),
                    tool_call_id=call_id, name=name),
        ]

    def abstention(self, index: int, example_id: str) -> Example:
        rng = random.Random(f"{self.seed}:{self.label}:abstain:{index}")
        messages = [
            Message(role="system", content=self.teacher.system_prompt(self.servers, self.today)),
            Message(role="user", content=self.teacher.irrelevant_request(rng)),
            Message(role="assistant", content=self.teacher.decline(self.servers, rng)),
        ]
        task = Task(servers=self.servers, seed=self.task_seed, calls=[], expected="abstain",
                    initial_state_hash=self.initial_hash, meta={"source": "irrelevance"})
        return Example(id=example_id, messages=messages, tools=self.tools_openai, task=task)


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
    """This chain could not become a conversation (an id did not flow); the pipeline counts it."""


