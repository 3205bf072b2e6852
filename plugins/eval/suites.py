"""The ``prove`` evaluator: held-out tasks from a synthesized corpus, played on live sessions.

**Split.** ``split_corpus`` assigns whole *chains* (the tool sequence a conversation was drafted
from, ``task.meta["chain"]``) to the held-out side, so no held-out chain is ever seen in
training; a clarification example goes with the conversation it came from. ``unseen_tools``
also holds out that share of each server's tools whole: every example that uses one is
held out, so training never sees those tools called. The split is a pure function of the chain
keys and ``split_seed``; it is written to ``<eval>/benchmarks/prove/split/`` (``train.jsonl``
for the trainer, ``heldout.jsonl``, ``split.json``).

**Metrics per behaviour** (call / clarify / abstain). Each held-out example is played with the
shared rollout loop (``prove_core.reward.rollout``) on its own live session, then scored by the reward
(the paper's components plus ``final_state``):

- *task success* — call: the end state equals the ground truth's end state **and** every
  ground-truth step is covered in dependency order (a read-only chain leaves the state as it
  was, so the state alone cannot tell a model that did nothing); clarify / abstain: no call;
- every reward component and the total (means over the tasks where they apply);
- calls per task, the budget B = n_gt + ⌈β·n_gt⌉ of call tasks and the share over budget.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from prove_core import hookimpl
from prove_core.config import RewardComponentConfig, RewardConfig, resolve
from prove_core.env.runtime import Environments
from prove_core.errors import ConfigError, RequestFailed
from prove_core.eval.core import EvalContext, Outcome, Reference, begin_episode, category_rates
from prove_core.model import Example, JsonlWriter, ToolCall, from_json, read_jsonl, to_json
from prove_core.reward.core import DEFAULT_COMPONENTS, build_reward
from prove_core.reward.rollout import Policy, PolicyTurn, RolloutLimits, rollout

BEHAVIOURS = ("call", "clarify", "abstain")


# -- the split ---------------------------------------------------------------------------------------------


def chain_key(example: Example) -> str:
    """What keeps examples together on one side of the split: the chain they were drafted from."""
    chain = example.task.meta.get("chain")
    if chain:
        return json.dumps([example.task.servers, chain], sort_keys=True, default=str)
    if example.task.calls:
        return json.dumps([example.task.servers, [c.tool for c in example.task.calls]])
    return json.dumps(["example", example.id.removesuffix("-clarify")])


def _unit(seed: int, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def unseen_tools(examples: Sequence[Example], share: float, seed: int) -> dict[str, list[str]]:
    """Per server, the ``share`` of its called tools held out whole (chosen by hash)."""
    if share <= 0:
        return {}
    used: dict[str, set[str]] = {}
    for example in examples:
        if len(example.task.servers) == 1:
            used.setdefault(example.task.servers[0], set()).update(c.tool for c in example.task.calls)
    out = {}
    for server, tools in sorted(used.items()):
        ranked = sorted(tools, key=lambda t: _unit(seed, f"tool:{server}:{t}"))
        out[server] = sorted(ranked[: math.ceil(share * len(ranked))])
    return out


def tools_called(example: Example) -> set[str]:
    """Every tool the example shows being called: its ground truth, and failed or retried calls."""
    return {c.tool for c in example.task.calls} | {c.name for m in example.messages for c in m.tool_calls}


def split_corpus(examples: Sequence[Example], *, heldout: float, unseen_tools_share: float = 0.0,
                 seed: int = 0) -> tuple[list[Example], list[Example], dict[str, Any]]:
    """(train, held-out, facts). Whole chains go to one side (a clarification example shares its
    conversation's chain); a chain is held out by hash, or when any of its examples calls a
    held-out tool."""
    hidden = unseen_tools(examples, unseen_tools_share, seed)
    chains: dict[str, list[Example]] = {}
    for example in examples:
        chains.setdefault(chain_key(example), []).append(example)

    def held_out(key: str, group: list[Example]) -> bool:
        if _unit(seed, key) < heldout:
            return True
        return any(tools_called(e) & set(hidden.get(e.task.servers[0], ())) for e in group if len(e.task.servers) == 1)

    test_chains = {key for key, group in chains.items() if held_out(key, group)}
    train = [e for e in examples if chain_key(e) not in test_chains]
    test = [e for e in examples if chain_key(e) in test_chains]
    facts = {"train": len(train), "heldout": len(test), "heldout_chains": len(test_chains),
             "chains_in_both": len({chain_key(e) for e in train} & test_chains), "unseen_tools": hidden,
             "heldout_share": heldout, "seed": seed}
    return train, test, facts


def write_split(train: Sequence[Example], test: Sequence[Example], facts: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, examples in (("train", train), ("heldout", test)):
        path = out_dir / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        with JsonlWriter(path) as writer:
            for example in examples:
                writer.write(to_json(example))
    (out_dir / "split.json").write_text(json.dumps(facts, indent=2))


# -- playing -----------------------------------------------------------------------------------------------


def reference_of(example: Example) -> Reference:
    """The example's own assistant turns, grouped by the user turn they answer. Prose between two
    calls of one user turn (a note before a retry) goes with the next call: in a rollout, a turn
    without a call ends the assistant's answer."""
    grouped: list[list[Any]] = []
    for message in example.messages:
        if message.role == "user":
            grouped.append([])
        elif message.role == "assistant" and grouped:
            grouped[-1].append(message)
    turns = []
    for messages in grouped:
        turn, prose = [], []
        for message in messages:
            if message.content:
                prose.append(message.content)
            if message.tool_calls:
                calls = [ToolCall(id=c.id, name=c.name, arguments=dict(c.arguments)) for c in message.tool_calls]
                turn.append(PolicyTurn(content="\n".join(prose), attempts=calls))
                prose = []
        if prose:
            turn.append(PolicyTurn(content="\n".join(prose)))
        turns.append(turn)
    return Reference(turns=turns)


@attrs.frozen(kw_only=True)
class ProveSuiteConfig:
    corpus: str | None = None  # default: the run's synthesized corpus, <run_dir>/synth/corpus.jsonl
    heldout: float = attrs.field(default=0.2, validator=[attrs.validators.gt(0), attrs.validators.le(1)])
    unseen_tools: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0), attrs.validators.lt(1)])
    split_seed: int = 0
    behaviours: list[str] = attrs.field(factory=lambda: list(BEHAVIOURS))
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    max_user_turns: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    max_assistant_turns: int = attrs.field(default=10, validator=attrs.validators.gt(0))
    transcripts: bool = True  # keep each rollout's messages in the results file

    @behaviours.validator
    def _check(self, _attr: Any, value: list[str]) -> None:
        if not value or set(value) - set(BEHAVIOURS):
            raise ValueError(f"behaviours must be a non-empty subset of {BEHAVIOURS}")


class ProveSuite:
    """Held-out synthesized tasks (unseen chains, optionally unseen tools), per behaviour."""

    name = "prove"
    Config = ProveSuiteConfig
    resumable_options = ("behaviours",)  # choose tasks: a resume may change them
    headline_label = ("success on `call` tasks first (what training is for), then every task pooled, then each "
                      "behaviour; no mean of the behaviours: a model that never calls passes every clarify and "
                      "abstain task")

    def __init__(self, config: ProveSuiteConfig) -> None:
        self.config = config

    @staticmethod
    def headline(records: list[dict[str, Any]]) -> dict[str, float | None]:
        """The suite's headline: the call-task success rate, the pooled rate over every task, then
        each behaviour's rate (``None`` where none was played)."""
        rates = category_rates(records)
        pooled = sum(bool(r["success"]) for r in records) / len(records) if records else None
        return {"call": rates.get("call"), "all tasks": pooled,
                **{b: rates.get(b) for b in BEHAVIOURS if b != "call"}}

    def data_identity(self, experiment: Any) -> str | None:
        """The corpus's content hash: a resynthesized corpus holds other held-out tasks, whose
        results must not be mixed with the old ones (``None`` while there is no corpus)."""
        import hashlib

        if not self.config.corpus and experiment is None:
            return None
        path = Path(self.config.corpus) if self.config.corpus else experiment.run_dir / "synth" / "corpus.jsonl"
        if not path.is_file():
            return None
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()[:16]

    def _corpus(self, context: EvalContext) -> Path:
        path = Path(self.config.corpus) if self.config.corpus else context.experiment.run_dir / "synth" / "corpus.jsonl"
        if not path.is_file():
            raise ConfigError(f"$.eval.benchmarks: the prove suite's corpus {path} does not exist "
                              "(run `prove synth` first, or set options.corpus)")
        return path

    def evaluate(self, policy: Policy, context: EvalContext) -> Iterator[Outcome]:
        cfg = self.config
        examples = [from_json(r, Example) for r in read_jsonl(self._corpus(context))]
        train, heldout, facts = split_corpus(examples, heldout=cfg.heldout, unseen_tools_share=cfg.unseen_tools,
                                             seed=cfg.split_seed)
        write_split(train, heldout, facts, context.out_dir / "split")
        options = {s.name: s.options for s in resolve(context.experiment, context.registry)}
        components = [RewardComponentConfig(name=n) for n in (*DEFAULT_COMPONENTS, "final_state")]
        reward = build_reward(RewardConfig(components=components), context.registry, server_options=options,
                              sessions=context.experiment.sessions)
        efficiency = next(c.component for c in reward.components if c.name == "efficiency")
        limits = RolloutLimits(max_user_turns=cfg.max_user_turns, max_assistant_turns=cfg.max_assistant_turns)
        environments = Environments(context.registry, options, sessions=context.experiment.sessions, hooks=context.hooks)
        taken = {b: 0 for b in BEHAVIOURS}
        for example in heldout:
            behaviour = example.task.expected
            if behaviour not in cfg.behaviours or (cfg.limit is not None and taken[behaviour] >= cfg.limit):
                continue
            taken[behaviour] += 1
            if not context.wanted(example.id):
                continue
            begin_episode(policy, reference_of(example))
            try:
                played = rollout(policy, example, environments(example.task), limits=limits)
            except RequestFailed as exc:  # recorded as failed, the run goes on (docs/evaluation.md)
                yield Outcome(task_id=example.id, category=behaviour, success=False,
                              details={"expected": behaviour, "error": str(exc), "status": exc.status})
                continue
            result = reward.score(played.rollout)
            yield self._outcome(example, played, result, efficiency.config.beta)

    def _outcome(self, example: Example, played: Any, result: Any, beta: float) -> Outcome:
        from prove_plugins.reward.components import budget

        task = example.task
        scores = result.scores
        n_calls = played.rollout.n_attempts
        metrics: dict[str, float] = {"reward": result.total, "reward_best": result.best, "calls": float(n_calls)}
        for name, score in scores.items():
            if score.applies and score.error is None:
                metrics[name] = score.value
        if task.expected == "call":
            covered = scores["coverage"].applies and scores["coverage"].value == 1.0
            same_state = scores["final_state"].value == 1.0
            success = covered and same_state
            if task.calls:
                b = budget(len(task.calls), beta)
                metrics.update(budget=float(b), over_budget=float(n_calls > b))
        else:
            success = n_calls == 0
        details: dict[str, Any] = {"expected": task.expected, "servers": task.servers,
                                   "explanations": {n: s.explanation for n, s in scores.items() if s.applies}}
        if self.config.transcripts:
            details["messages"] = played.messages
        return Outcome(task_id=example.id, category=task.expected, success=success, score=result.total,
                       metrics=metrics, details=details)


@hookimpl
def prove_register_evaluators(register: Any) -> None:
    register(ProveSuite)
