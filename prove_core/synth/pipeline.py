"""``prove synth``: the grounded synthesis pipeline (docs/synthesis.md).

    graph (extractor) -> chains (extractor) -> live sampling (sampler)
      -> conversations (state machine + teacher) -> replay validation -> provenance/grounding
      -> dedup -> corpus.jsonl (+ exports, stats, plots)

Each server of the experiment is synthesized on its own environment, so tool names are the
ones `prove serve <server>` publishes and a task's ``servers`` rebuild exactly that
environment. Conversation ``i`` is a pure function of the seed and ``i``, which makes a run
deterministic and lets an interrupted run resume: ids already in the corpus or the drop log
are skipped, and nothing is lost or written twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeGuard, runtime_checkable

import attrs
import structlog

from prove_core.config import Experiment, ImportConfig, ResolvedServer, SynthConfig, resolve
from prove_core.env.runtime import Environment, build_runtime
from prove_core.errors import ConfigError, PluginError
from prove_core.model import Example, JsonlWriter, read_jsonl, to_json, write_atomic
from prove_core.synth.conversation import ConversationMachine, Unusable
from prove_core.synth.graph import Chain, GraphCache, coverage_report, schema_hash
from prove_core.synth.sampling import SupportRule
from prove_core.synth.validation import Deduper, call_tokens, mark_unseen_writes, replay, ungrounded_mentions

log = structlog.get_logger()


class SamplingContext(Protocol):
    """What the pipeline uses of the object a sampler's ``sample(env, rules)`` returns (the
    bundled ``prove_plugins.synth.sampler.SamplingContext`` is one): ``subset`` draws the entities of a
    stretch of conversations, and the conversation machine asks the subset for ``candidates``."""

    def subset(self, rng: random.Random, size: int) -> SamplingContext: ...

    def candidates(self, server: str, entity: str) -> list[dict[str, Any]]: ...


_CONTEXT_METHODS = ("subset", "candidates")


@runtime_checkable
class Rewriter(Protocol):
    """A teacher that also rewrites each drafted conversation as a whole (the ``llm`` teacher):
    ``rewrite`` returns the example with new text (calls and results untouched), before replay
    validation; what it did goes in ``task.meta["teacher"]``, summed in the stats."""

    def rewrite(self, example: Example) -> Example: ...


def _is_context(obj: object) -> TypeGuard[SamplingContext]:
    return all(callable(getattr(obj, name, None)) for name in _CONTEXT_METHODS)


def _sample(registry: Any, cfg: SynthConfig, env: Environment, rules: list[SupportRule]) -> SamplingContext:
    """The sampling context of one world; a sampler that returns something else is named here,
    instead of failing later deep inside the pipeline."""
    context = build_component(registry, cfg, "sampler").sample(env, rules)
    if not _is_context(context):
        missing = [name for name in _CONTEXT_METHODS if not callable(getattr(context, name, None))]
        plugin = registry.component("samplers", cfg.sampler).plugin
        raise PluginError(
            f"sampler {cfg.sampler!r} from plugin {plugin!r} returned a {type(context).__name__} from sample(env, rules), "
            f"not a sampling context (it has no {' or '.join(f'{m}()' for m in missing)}): return an object with "
            "subset(rng, size) and candidates(server, entity), such as prove_plugins.synth.sampler.SamplingContext")
    return context


@attrs.define
class World:
    """One seed of a synthesis unit: its live environment, the machine that drafts on it and the
    entities sampled from it."""

    seed: int
    env: Environment
    machine: ConversationMachine
    context: SamplingContext


@attrs.define
class ServerPlan:
    """One synthesis unit: a server, or a group of servers mounted together (cross-server), with
    its chains and the worlds (seeds) conversations are drawn from."""

    name: str
    worlds: list[World]
    chains: list[Chain]
    coverage: dict[str, Any]

    @property
    def env(self) -> Environment:
        return self.worlds[0].env


def _world(entries: list[ResolvedServer], seed: int, cfg: SynthConfig, plugins: Any, experiment: Experiment,
           rules: list[SupportRule], teacher: Any) -> World:
    registry = plugins.registry
    env = Environment([build_runtime(registry.load("servers", e.name), seed=seed, options=e.options,
                                     sessions=experiment.sessions) for e in entries], hooks=plugins.hook)
    machine = ConversationMachine(env, teacher, cfg.conversation, seed=cfg.seed)
    machine.max_error_rate = cfg.max_error_rate
    machine.max_chain_length = cfg.max_chain_length
    machine.seed_options = {e.name: _plain(e.options) for e in entries}
    return World(seed=seed, env=env, machine=machine, context=_sample(registry, cfg, env, rules))


def _plain(options: Any) -> dict[str, Any]:
    return attrs.asdict(options) if attrs.has(type(options)) else dict(options or {})


def _plan(entries: list[ResolvedServer], cfg: SynthConfig, plugins: Any, experiment: Experiment) -> ServerPlan:
    """Graph, chains, and the worlds (one per seed, each with its sampling context and machine)
    for one server, or for a mounted group whose chains must cross servers (a group shares the
    first server's seeds)."""
    registry = plugins.registry
    seed = entries[0].seed
    rules = [SupportRule.from_config(r) for r in cfg.rules]
    teacher = build_component(registry, cfg, "teacher")
    worlds = [_world(entries, seed + k, cfg, plugins, experiment, rules, teacher) for k in range(cfg.seeds)]
    env = worlds[0].env
    name = "+".join(e.name for e in entries)
    labeller = build_component(registry, cfg, "labeller")
    cache = GraphCache(cfg.cache_dir)
    digest = schema_hash(env.specs())
    graph = cache.load(labeller.name, digest)
    if graph is None:
        graph = labeller.label(env)
        cache.store(graph)
    else:
        log.info("graph from cache", server=name, digest=digest)
    extractor = build_component(registry, cfg, "extractor")
    wanted = cfg.chains_per_server or max(400, math.ceil(1.5 * cfg.examples / max(1, len(experiment.servers))))
    if len(entries) > 1:  # a mounted group exists for its cross-server chains only
        chains = [c for c in extractor.extract(graph, seed=cfg.seed) if any(e.flow for e in c.edges)]
        chains = random.Random(cfg.seed).sample(chains, min(wanted, len(chains)))
        problem = "no chain crosses from one server to another"
    else:
        chains = extractor.extract(graph, sample=wanted, seed=cfg.seed)
        problem = f"the dependency graph yields no chain of length >= {cfg.min_chain_length}"
    if not chains:
        raise ConfigError(f"synthesis on {name!r}: {problem}")
    random.Random(f"{cfg.seed}:{name}").shuffle(chains)
    return ServerPlan(name=name, worlds=worlds, chains=chains, coverage=coverage_report(graph.tools, chains, graph))


def build_component(registry: Any, cfg: SynthConfig, role: str) -> Any:
    """The component ``[synth]`` names for ``role`` (``labeller``, ``extractor``, ``sampler``,
    ``teacher``), built by the registry's loader with the ``[synth]`` settings its ``Config``
    declares (``SynthConfig.component_options``); option errors name their ``$.synth`` path,
    an unknown name raises the registry's ``UnknownComponent``."""
    kind, name = SynthConfig.COMPONENTS[role], getattr(cfg, role)
    declared = attrs.fields_dict(registry.config_class(kind, name))
    options = {k: v for k, v in cfg.component_options(role).items() if k in declared}
    return registry.build(kind, name, options, path="$.synth")


class Stats:
    def __init__(self) -> None:
        self.kept: Counter[str] = Counter()
        self.drops: Counter[str] = Counter()
        self.drops_by_tool: dict[str, Counter[str]] = {}
        self.by_server: Counter[str] = Counter()
        self.by_stratum: Counter[str] = Counter()
        self.by_length: Counter[int] = Counter()
        self.by_behaviour: Counter[str] = Counter()
        self.tools_used: dict[str, set[str]] = {}
        self.tool_calls: dict[str, Counter[str]] = {}
        self.perturbations: Counter[str] = Counter()
        self.teacher: Counter[str] = Counter()  # what a rewriting teacher did (Rewriter), over kept examples
        self.seconds = {"generate": 0.0, "validate": 0.0}

    def drop(self, reason: str, detail: str) -> None:
        self.drops[reason] += 1
        tool = _failing_tool(detail)
        if tool:
            self.drops_by_tool.setdefault(reason, Counter())[tool] += 1

    def keep(self, example: Example) -> None:
        server = "+".join(example.task.servers) if example.task.servers else f"imported:{example.task.meta.get('source', '?')}"
        self.by_server[server] += 1
        self.by_behaviour[example.task.expected] += 1
        if example.task.expected == "call":
            self.by_stratum[example.task.meta.get("stratum", "?")] += 1
            self.by_length[len(example.task.calls)] += 1
        self.tools_used.setdefault(server, set()).update(c.tool for c in example.task.calls)
        self.tool_calls.setdefault(server, Counter()).update(c.tool for c in example.task.calls)
        for change in example.task.meta.get("perturbations", []):
            self.perturbations[change.get("name", "?")] += 1
        note = example.task.meta.get("teacher")
        if isinstance(note, dict):
            self.teacher["examples"] += 1
            self.teacher["endpoint_fallbacks"] += bool(note.get("endpoint_fallback"))
            self.teacher["turns_rewritten"] += note.get("rewritten", 0)
            self.teacher["turns_kept_draft"] += note.get("kept_draft", 0)
            self.teacher.update({f"rejected_{k}": v for k, v in note.get("rejected", {}).items()})

    def to_json(self, plans: dict[str, ServerPlan]) -> dict[str, Any]:
        total = self.seconds["generate"] + self.seconds["validate"]
        return {
            "examples": sum(self.by_behaviour.values()),
            "by_server": dict(self.by_server), "by_behaviour": dict(self.by_behaviour),
            "by_stratum": dict(self.by_stratum), "by_chain_length": {str(k): v for k, v in sorted(self.by_length.items())},
            "drops": dict(self.drops),
            "drops_by_tool": {reason: dict(c.most_common(10)) for reason, c in sorted(self.drops_by_tool.items())},
            "perturbations": dict(self.perturbations),
            **({"teacher": dict(sorted(self.teacher.items()))} if self.teacher else {}),
            "tool_coverage": {
                name: {"tools": len(p.env.specs()), "used": len(self.tools_used.get(name, ())),
                       "share": round(len(self.tools_used.get(name, ())) / len(p.env.specs()), 3),
                       "unused": sorted({t.name for t in p.env.specs()} - self.tools_used.get(name, set())),
                       "chains": len(p.chains), "chain_coverage": p.coverage}
                for name, p in plans.items()
            },
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "validation_share": round(self.seconds["validate"] / total, 3) if total else 0.0,
        }


def _within_quotas(example: Example, original: Example | None, stats: Stats, cfg: SynthConfig) -> Example:
    """A perturbation that turned a call conversation into an abstain or clarify example is undone
    (``original``, the example before the perturbations, comes back) when that behaviour already
    has its share of the corpus (the paper's mix)."""
    expected = example.task.expected
    rates = {"abstain": cfg.abstention_rate, "clarify": cfg.clarification_rate}
    if original is None or expected not in rates or example.task.meta.get("source") == "irrelevance":
        return example
    if stats.by_behaviour[expected] >= rates[expected] * (sum(stats.by_behaviour.values()) + 1):
        return original
    return example


def _yield(corpus: Path, drops: Path) -> dict[str, Any]:
    """Per synthesis unit: conversations drafted, kept, and the kept share (companions and
    imports aside)."""
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    drafted = re.compile(r"^(.+)-\d{6}$")  # a conversation's id (not a companion's, not an import's)
    for path, counts in ((corpus, kept), (drops, dropped)):
        for record in read_jsonl(path):
            match = drafted.match(record["id"])
            if match and (path == drops or record["task"]["meta"].get("source") in (None, "irrelevance")):
                counts[match.group(1)] += 1
    return {name: {"drafted": kept[name] + dropped[name], "kept": kept[name],
                   "share": round(kept[name] / (kept[name] + dropped[name]), 3)}
            for name in sorted(set(kept) | set(dropped))}


def _over_used(example: Example, stats: Stats, plans: dict[str, ServerPlan], skew: float) -> bool:
    """Would keeping ``example`` push one of its tools above ``skew`` times the mean number of
    calls per tool of its server (with a little slack while the corpus is small), while bringing
    no tool that is still below the mean? An entry tool every chain can start from
    (``list_vehicles``) would otherwise be in most conversations; a conversation that gives a
    rare tool its calls is kept even when it passes through it."""
    server = "+".join(example.task.servers)
    plan, counts = plans.get(server), stats.tool_calls.get(server, Counter())
    if plan is None or not example.task.calls:
        return False
    tools = len(plan.env.specs())
    mean = (sum(counts.values()) + len(example.task.calls)) / tools
    over = any(counts[c.tool] + 1 > skew * mean + 5 for c in example.task.calls)
    return over and not any(counts[c.tool] < mean for c in example.task.calls)


def _validate(example: Example, env: Environment, cfg: SynthConfig) -> tuple[str | None, str]:
    """The drop reason and its detail (the failing call, its error code and reason), or
    ``(None, "")`` when the example passes every check."""
    verdict = replay(example, env, max_error_rate=cfg.max_error_rate)
    if not verdict.ok:
        return verdict.reason, verdict.detail
    unknown = ungrounded_mentions(example, env)
    if unknown:
        return "ungrounded_mention", f"user turns name ids that do not exist: {sorted(set(unknown))[:5]}"
    return None, ""


class Progress:
    """The synthesis progress bar (tqdm on stderr: kept call conversations of the target, their
    rate and the time left), shown only when ``enabled`` (by default: stderr is a terminal)."""

    def __init__(self, total: int, enabled: bool, initial: int = 0) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=min(initial, total), disable=not enabled, desc="synth",
                        unit="conv", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)

    def update(self, done: int) -> None:
        done = min(done, int(self.bar.total))
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


# Settings that change how far a run goes or what it writes beside the corpus, not the corpus:
# a resume may change them (ask for more examples, more workers, other exports).
_NOT_FINGERPRINTED = ("examples", "max_attempts_factor", "workers", "exports", "plots", "cache_dir")


def code_hash(obj: object) -> str:
    """A hash of the code ``obj`` (a class, a function) is defined in, for ``fingerprint``: the
    file of its module, or every ``.py`` file of the module's package when the module lives in
    a sub-package (``prove_servers.filesystem.app``: all of ``servers/filesystem/*.py``, since
    its sibling modules are part of the server); ``"?"`` when the module has no file."""
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if module is None or not path:
        return "?"
    if module.__name__.count(".") < 2:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    digest = hashlib.sha256()
    for file in sorted(Path(path).parent.glob("*.py"), key=lambda f: f.name):
        digest.update(f"{file.name}\0{hashlib.sha256(file.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()[:16]


def fingerprint(experiment: Experiment, resolved: list[ResolvedServer], plugins: Any) -> dict[str, Any]:
    """What a corpus is a function of: the servers' code, seeds and seed options, the synthesis
    settings, and the code of the components that write it. A resume must match it."""
    import cattrs

    cfg = experiment.synth or SynthConfig()
    registry = plugins.registry
    settings = {k: v for k, v in cattrs.Converter().unstructure(cfg).items() if k not in _NOT_FINGERPRINTED}

    servers = {}
    for entry in resolved:
        server = registry.load("servers", entry.name)
        servers[entry.name] = {"seed": entry.seed, "options": _plain(entry.options), "code": code_hash(server.seed_fn),
                               "schema": schema_hash(server.specs())}
    components = {role: code_hash(registry.load(kind, getattr(cfg, role))) for role, kind in SynthConfig.COMPONENTS.items()}
    components["machine"] = code_hash(ConversationMachine)
    return {"servers": servers, "synth": settings, "components": components}


def _check_resume(out_dir: Path, current: dict[str, Any], fresh: bool) -> None:
    """Start over when asked; refuse to extend a corpus made from other servers, seeds, options
    or settings (its examples would silently mix two different pipelines)."""
    files = [out_dir / n for n in ("corpus.jsonl", "drops.jsonl", "fingerprint.json")]
    if fresh:
        for path in files:
            path.unlink(missing_ok=True)
    has_data = any(p.exists() and p.stat().st_size for p in files[:2])
    stored_path = files[2]
    if has_data:
        if not stored_path.exists():
            raise ConfigError(f"{out_dir} holds a corpus with no fingerprint (made by an older PROVE), so it cannot "
                              "be resumed safely; start over with `prove synth CONFIG --fresh` (or delete the folder), or choose "
                              "another run name")
        stored = json.loads(stored_path.read_text())
        if stored != current:
            changed = sorted(_differences(stored, current))
            raise ConfigError(f"{out_dir} holds a corpus made with other settings or code ({', '.join(changed[:8])}); "
                              "resuming would mix the two. Start over with `prove synth CONFIG --fresh` (or delete "
                              "the folder), or choose another run name")
    write_atomic(stored_path, json.dumps(current, indent=2, sort_keys=True))


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)]
    return [] if a == b else [path or "(all)"]


def synthesize(experiment: Experiment, plugins: Any, *, echo: Callable[[str], None] = print,
               progress: bool | None = None, fresh: bool = False) -> dict[str, Any]:
    cfg = experiment.synth or SynthConfig()
    out_dir = experiment.run_dir / "synth"
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = {entry.name: entry for entry in resolve(experiment, plugins.registry)}
    perturber = None  # built before the fingerprint is compared: a bad option is reported as itself
    if cfg.perturb:
        from prove_core.synth.perturbation import build_perturber

        perturber = build_perturber(cfg.perturbations, plugins.registry, path="$.synth.perturbations",
                                    teacher=build_component(plugins.registry, cfg, "teacher"))
    _check_resume(out_dir, fingerprint(experiment, list(resolved.values()), plugins), fresh)
    units = [[entry] for entry in resolved.values()]
    for i, group in enumerate(cfg.mounts):
        missing = [n for n in group if n not in resolved]
        if missing or len(group) < 2:
            raise ConfigError(f"$.synth.mounts[{i}]: name at least two of the experiment's servers "
                              f"(unknown: {missing})" if missing else f"$.synth.mounts[{i}]: a mount needs two servers")
        units.append([resolved[n] for n in group])
    plans = {p.name: p for p in (_plan(unit, cfg, plugins, experiment) for unit in units)}
    names = sorted(plans)
    stats = Stats()
    corpus, drops = out_dir / "corpus.jsonl", out_dir / "drops.jsonl"
    dedup = Deduper(cfg.dedup_threshold)
    kept_calls = 0
    for record in read_jsonl(corpus):  # resume: rebuild counters and the dedup index
        example = _example(record)
        dedup.add(call_tokens(example))
        stats.keep(example)
        kept_calls += example.task.expected == "call" and not example.id.endswith("-clarify")
    for record in read_jsonl(drops):
        stats.drop(record["reason"], record.get("detail", ""))
    resumed = kept_calls
    bar = Progress(cfg.examples, sys.stderr.isatty() if progress is None else progress, initial=kept_calls)
    global _WORK
    _WORK = _Work(plans=plans, cfg=cfg, names=names, perturber=perturber)
    with JsonlWriter(corpus) as writer, JsonlWriter(drops) as dropped:
        limit = cfg.examples * cfg.max_attempts_factor
        todo = (i for i in range(limit) if _WORK.example_id(i) not in writer and _WORK.example_id(i) not in dropped)
        with _pool(cfg.workers or os.cpu_count() or 1) as pool:
            # imap keeps index order, so dedup and writes happen exactly as in a single process
            results = pool.imap(_produce, todo, chunksize=16) if pool else map(_produce, todo)
            for outcome in results:
                if kept_calls >= cfg.examples:
                    break  # workers may have run ahead; their results past the target are not used
                stats.seconds["generate"] += outcome.generate_s
                stats.seconds["validate"] += outcome.validate_s
                reason, drafted = outcome.reason, outcome.example
                if reason is None and drafted is not None:
                    drafted = _within_quotas(drafted, outcome.original, stats, cfg)
                    if drafted.task.meta.get("source") == "irrelevance" and \
                            stats.by_behaviour["abstain"] >= cfg.abstention_rate * (sum(stats.by_behaviour.values()) + 1):
                        reason = "abstention_quota"  # keeps abstention at its share of the kept corpus
                    elif cfg.max_tool_skew and _over_used(drafted, stats, plans, cfg.max_tool_skew):
                        reason = "tool_balance"  # keeps one entry tool (list_vehicles) from dominating
                    elif not dedup.offer(call_tokens(drafted)):
                        reason = "duplicate"
                if reason is not None:
                    dropped.write({"id": outcome.example_id, "reason": reason, "detail": outcome.detail})
                    stats.drop(reason, outcome.detail)
                    continue
                assert drafted is not None  # only a draft that failed lacks its example, and it has a reason
                # The companion goes first: a kill between the two writes leaves the main example
                # unwritten, so a resumed run regenerates it (and skips the companion already there).
                extra = outcome.companion
                if extra is not None and extra.id not in writer and \
                        stats.by_behaviour["clarify"] < cfg.clarification_rate * (sum(stats.by_behaviour.values()) + 1) \
                        and dedup.offer(call_tokens(extra)):
                    writer.write(to_json(extra))
                    stats.keep(extra)
                writer.write(to_json(drafted))
                stats.keep(drafted)
                kept_calls += drafted.task.expected == "call"
                bar.update(kept_calls)
        _WORK = None
        bar.close()
        for spec in cfg.imports:
            for example in _import(spec, plugins, cfg):
                if example.id in writer:
                    continue
                if dedup.offer(call_tokens(example)):
                    writer.write(to_json(example))
                    stats.keep(example)
                else:
                    stats.drop("duplicate", "")
    report = stats.to_json(plans)
    from prove_core.synth.quality import figures, tool_finder

    report["quality"] = figures((_example(r) for r in read_jsonl(corpus)), tool_finder(plugins.registry))
    report["yield"] = _yield(corpus, drops)
    report["resumed_from"] = resumed
    report["target"] = cfg.examples
    report["reached_target"] = kept_calls >= cfg.examples
    (out_dir / "stats.json").write_text(json.dumps(report, indent=2))
    _write_markdown(report, out_dir / "stats.md")
    if cfg.plots:
        report["plots"] = _plots(report, out_dir)
    from prove_core.synth.exporters import export

    report["exports"] = {fmt: str(export(fmt, corpus, out_dir)) for fmt in cfg.exports}
    echo(f"synth: {report['examples']} examples ({_fmt(report['by_behaviour'])}); "
         f"dropped {sum(report['drops'].values())} ({_fmt(report['drops'])}); corpus {corpus}")
    for name, cov in report["tool_coverage"].items():
        echo(f"  {name}: {cov['used']}/{cov['tools']} tools used, {cov['chains']} chains")
    q = report["quality"]
    echo(f"  quality: {q['no_assistant_turn']:.1%} without an assistant turn, {q['written_replies']:.0%} of "
         f"clarify/abstain with a written reply, {q['unnamed_entity_calls']:.2%} of calls on an unnamed entity, "
         f"{q['slots']['share_varied']:.0%} of slots varied (stats.md)")
    echo(f"  replies: {q['answered_reads']:.1%} of reads answered, {q['unsafe_recoveries']} unsafe recoveries, "
         f"{q['false_claims']} false claims, {q['unneeded_clarifications']:.1%} needless clarifications")
    return report


@attrs.define
class _Work:
    """What a worker needs; set before the pool forks, so workers inherit it without pickling."""

    plans: dict[str, ServerPlan]
    cfg: SynthConfig
    names: list[str]
    perturber: Any = None
    contexts: dict[tuple[str, int, int], SamplingContext] = attrs.field(factory=dict)

    def example_id(self, i: int) -> str:
        return f"{self.names[i % len(self.names)]}-{i:06d}"  # no run name: same seed, same corpus


_WORK: _Work | None = None


@attrs.frozen
class _Outcome:
    example_id: str
    example: Example | None
    companion: Example | None
    reason: str | None
    detail: str
    generate_s: float
    validate_s: float
    original: Example | None = None  # before the perturbations, when they changed it


def _produce(i: int) -> _Outcome:
    """Conversation ``i``: draft it and validate it (everything but dedup, which needs order)."""
    work = _WORK
    assert work is not None
    cfg, server = work.cfg, work.names[i % len(work.names)]
    plan, n = work.plans[server], i // len(work.names)
    example_id = work.example_id(i)
    w = random.Random(f"{cfg.seed}:{server}:{n}:world").randrange(len(plan.worlds))
    world = plan.worlds[w]
    refresh = n // cfg.refresh_every
    if (server, w, refresh) not in work.contexts:
        work.contexts[(server, w, refresh)] = world.context.subset(
            random.Random(f"{cfg.seed}:{server}:{w}:{refresh}"), cfg.sample_size)
    started = time.perf_counter()
    rng = random.Random(f"{cfg.seed}:{server}:{n}")  # not the run name: same seed, same corpus
    companion = None
    try:
        if rng.random() < cfg.abstention_rate:
            example = world.machine.abstention(n, example_id)
        else:
            drafted = world.machine.draft(plan.chains[n % len(plan.chains)], work.contexts[(server, w, refresh)],
                                          n, example_id)
            example, companion = drafted.example, drafted.clarification
    except Unusable as exc:
        return _Outcome(example_id, None, None, exc.reason, str(exc), time.perf_counter() - started, 0.0)
    teacher = world.machine.teacher
    if isinstance(teacher, Rewriter):  # the companion is a prefix of the conversation: it takes the same text
        example = teacher.rewrite(example)
        if companion is not None:
            companion = attrs.evolve(companion, messages=example.messages[:len(companion.messages)])
    generated = time.perf_counter()
    reason, detail = _validate(example, world.env, cfg)
    if reason is None:
        example = mark_unseen_writes(example, world.env)
    original = example
    if reason is None and work.perturber is not None:
        example = work.perturber(example)  # after validation: the replayed calls are the originals
    return _Outcome(example_id, example, companion, reason, detail, generated - started, time.perf_counter() - generated,
                    original=original if original is not example else None)


class _pool:
    """A fork-based process pool for ``workers > 1``; ``None`` (run inline) otherwise."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: Any = None

    def __enter__(self) -> Any:
        if self.workers > 1:
            import multiprocessing

            self.pool = multiprocessing.get_context("fork").Pool(self.workers)
        return self.pool

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


def _import(spec: ImportConfig, plugins: Any, cfg: SynthConfig) -> Iterator[Example]:
    from prove_core.synth.importers import when2call, xlam_irrelevance

    teacher = build_component(plugins.registry, cfg, "teacher")
    system = "You are an assistant that can call the tools listed for this conversation."
    path = Path(spec.path)
    if spec.format == "xlam_irrelevance":
        rng = random.Random(f"{cfg.seed}:xlam")
        return xlam_irrelevance(path, system=system, limit=spec.limit,
                                decline=lambda n: teacher.decline(["the tools listed"], rng))
    if spec.format == "when2call":
        return when2call(path, system=system, limit=spec.limit)
    raise ConfigError(f"$.synth.imports: unknown format {spec.format!r}")  # ImportConfig admits only the two above


def _example(record: dict[str, Any]) -> Example:
    from prove_core.model import from_json

    return from_json(record, Example)


# Where a drop's detail names the tool it is about: "no account value flowed from A to B" (B),
# "B: every request ...", "B needs the result ...", "B gave a different result ...", "B.password=..."
# (provenance) and, after "N of M calls failed: ", "B FAILED_PRECONDITION/REASON: ...". A detail in
# none of these shapes names no tool (its first word is not one: "the first call could not be planned").
_FLOWED_TO = re.compile(r"flowed from \w+ to (\w+)")
_LEADING_TOOL = re.compile(r"^(\w+)(?::| needs | gave |\.\w+=| [A-Z]\w*/)")


def _failing_tool(detail: str) -> str | None:
    """The tool a drop's detail names (``"close_account: every request ..."``,
    ``"2 of 4 calls failed: close_account FAILED_PRECONDITION/..."``), or ``None``."""
    flowed = _FLOWED_TO.search(detail)
    if flowed:
        return flowed.group(1)
    if ": " in detail and "calls failed" in detail:
        detail = detail.split(": ", 1)[1]
    match = _LEADING_TOOL.match(detail)
    return match.group(1) if match else None


def _fmt(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _write_markdown(report: dict[str, Any], path: Path) -> None:
    lines = ["# Synthesis report", "", f"Examples: **{report['examples']}** (target {report['target']} call conversations)", ""]
    for title, key in (("Behaviour", "by_behaviour"), ("Stratum", "by_stratum"), ("Server", "by_server"),
                       ("Ground-truth calls", "by_chain_length"), ("Drop reasons", "drops"),
                       ("Perturbations", "perturbations"), ("Teacher rewrites", "teacher")):
        if key not in report:
            continue
        lines += [f"## {title}", "", "| value | count |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in report[key].items()] + [""]
    lines += ["## Tool coverage", "", "| server | used / tools | unused |", "| --- | --- | --- |"]
    for name, cov in report["tool_coverage"].items():
        lines.append(f"| {name} | {cov['used']}/{cov['tools']} | {', '.join(cov['unused']) or '-'} |")
    lines += ["", "## Yield per server", "", "| server | drafted | kept | share |", "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {y['drafted']} | {y['kept']} | {y['share']:.0%} |" for name, y in report.get("yield", {}).items()]
    lines += ["", "## Drops by reason and tool", "", "| reason | tools (count) |", "| --- | --- |"]
    lines += [f"| {reason} | {', '.join(f'{t} ({n})' for t, n in tools.items())} |"
              for reason, tools in report.get("drops_by_tool", {}).items()]
    lines += [""]
    if "quality" in report:
        from prove_core.synth.quality import markdown

        lines += markdown(report["quality"])
    lines += ["", f"Time: generation {report['seconds']['generate']} s, validation {report['seconds']['validate']} s "
              f"({report['validation_share']:.0%} of the total)."]
    path.write_text("\n".join(lines) + "\n")


def _plots(report: dict[str, Any], out_dir: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots")
        return []
    paths = []
    fig, ax = plt.subplots(figsize=(5, 3.2))
    lengths = report["by_chain_length"]
    ax.bar(list(lengths), list(lengths.values()), color="#3b6ea8")
    ax.set_xlabel("ground-truth calls per conversation")
    ax.set_ylabel("conversations")
    ax.set_title("Chain length")
    fig.tight_layout()
    fig.savefig(out_dir / "chain_length.png", dpi=120)
    paths.append(str(out_dir / "chain_length.png"))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    cov = report["tool_coverage"]
    ax.bar(list(cov), [c["share"] * 100 for c in cov.values()], color="#5a9e6f")
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of tools used")
    ax.set_title("Tool coverage per server")
    fig.tight_layout()
    fig.savefig(out_dir / "tool_coverage.png", dpi=120)
    paths.append(str(out_dir / "tool_coverage.png"))
    plt.close(fig)
    return paths
