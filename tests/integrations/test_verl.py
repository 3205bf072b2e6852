"""The verl backend on CPU.

verl's GPU side (Ray, vLLM/SGLang, FSDP) cannot run here, and ``import verl`` itself imports Ray
(``verl/__init__.py`` imports ``verl.protocol``, which imports ``ray``), so, as the OpenRLHF test builds
OpenRLHF's parser from its source, these tests load **verl's own code, minus what needs Ray**:

- verl's packages are entered in ``sys.modules`` with their real paths but without running the two
  ``__init__`` files that import Ray (``verl`` and ``verl.experimental.agent_loop``);
- ``verl/experimental/agent_loop/agent_loop.py`` (``AgentLoopBase``, ``AgentLoopOutput``,
  ``AgentLoopWorker``...) and ``verl/utils/rollout_trace.py`` are executed from their source, statement by
  statement, with annotations postponed; an import is left out only when what it misses is Ray or one
  of the two packages only verl's cluster side needs (``tensordict``, ``orjson``: listed in
  ``NOT_INSTALLED``); ``AgentLoopManager``, which needs Ray to exist, is not defined; from
  ``verl/workers/rollout/replica.py`` only ``TokenOutput`` (what a server manager returns) is;
- the two functions those modules take from modules that import Ray (``get_event_loop`` from
  ``verl/utils/ray_utils.py``, ``compute_position_id_with_mask`` from ``verl/utils/model.py``) are taken
  from verl's source too. Nothing is stubbed: apart from the stand-in for the rollout server (as in the
  OpenRLHF test), every line that runs is verl's or PROVE's. ``AgentLoopWorker.__init__`` builds
  Ray-side objects, so the worker gets the attributes it would set.

Then the checks are verl's own: the launch overrides are applied to verl's packaged Hydra config
(``verl/trainer/config/ppo_trainer.yaml``, struct mode: an unknown key fails), the parquet files are
read by verl's ``RLHFDataset``, and the agent loop is instantiated from ``agent_loop.yaml`` and driven
through ``AgentLoopWorker._run_agent_loop`` (hydra ``instantiate``, ``run``, ``_agent_loop_postprocess``)
with a stand-in for verl's server manager that replays a ground-truth episode or really generates with
a tiny local model.
"""

import __future__

import ast
import asyncio
import importlib
import importlib.util
import json
import math
import shlex
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the verl backend's checks need torch (pip install torch==2.13.0)")
if importlib.util.find_spec("verl") is None:  # not importorskip: `import verl` imports Ray
    pytest.skip("install verl without its GPU dependencies: pip install --no-deps verl==0.9.1", allow_module_level=True)
pytest.importorskip("hydra", reason="verl's config loader: pip install hydra-core")
pytest.importorskip("codetiming", reason="imported by verl's agent loop module (through its profiler): pip install codetiming")

from prove_core.config import load_experiment  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.train.core import run_training  # noqa: E402

VERL = Path(importlib.util.find_spec("verl").origin).parent  # find_spec of a top-level package runs nothing
NOT_INSTALLED = {"ray", "tensordict", "orjson"}  # verl's cluster-side dependencies, deliberately absent here


# -- verl's code without Ray ------------------------------------------------------------------------------


def _names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {stmt.name}
    if isinstance(stmt, ast.Assign):
        return {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    return set()


def _run(stmt: ast.stmt, path: Path, namespace: dict[str, Any]) -> None:
    code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)


def verl_function(relative: str, name: str, namespace: dict[str, Any]) -> None:
    """Define verl's function ``name`` (from ``verl/<relative>``) in ``namespace``."""
    path = VERL / relative
    stmt = next(s for s in ast.parse(path.read_text()).body if isinstance(s, ast.FunctionDef) and s.name == name)
    _run(stmt, path, namespace)


def verl_module(name: str, relative: str, *, only: set[str] | None = None, leave_out: set[str] = frozenset(),
                functions: tuple[tuple[str, str], ...] = ()) -> types.ModuleType:
    """verl's module ``name`` executed from ``verl/<relative>`` (see the module docstring): its imports
    (less those of what is not installed here), then its definitions (``only`` those, or all but
    ``leave_out``), then ``functions`` (``(source file, function name)``) from other verl modules."""
    path = VERL / relative
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # pydantic resolves the postponed annotations in the module's namespace
    left_out = []
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            try:
                _run(stmt, path, module.__dict__)
            except ModuleNotFoundError as exc:
                if (exc.name or "").partition(".")[0] not in NOT_INSTALLED:
                    raise
                left_out.append(ast.unparse(stmt).split("\n")[0])
        elif (_names(stmt) & only) if only is not None else not _names(stmt) & leave_out:
            _run(stmt, path, module.__dict__)
    for source, function in functions:
        verl_function(source, function, module.__dict__)
    module.LEFT_OUT = left_out  # type: ignore[attr-defined]
    return module


def verl_package(name: str, path: Path) -> types.ModuleType:
    """verl's package ``name`` at its real path, without running its ``__init__`` (which imports Ray).
    What the ``__init__`` re-exports (``from .protocol import DataProto``) is imported on first use from
    the module it comes from, so a name that needs Ray fails with Ray's ModuleNotFoundError."""
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    package.__file__ = str(path / "__init__.py")
    exports = {}
    for stmt in ast.parse((path / "__init__.py").read_text()).body:
        if isinstance(stmt, ast.ImportFrom) and stmt.level == 1:
            for alias in stmt.names:
                exports[alias.asname or alias.name] = f"{name}.{stmt.module}"

    def exported(attribute: str) -> Any:
        if attribute not in exports:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        return getattr(importlib.import_module(exports[attribute]), attribute)

    package.__getattr__ = exported  # type: ignore[method-assign]
    sys.modules[name] = package
    return package


@pytest.fixture(scope="module")
def verl() -> Iterator[Any]:
    """verl's agent loop classes, and ``prove_plugins.train.verl_agent`` imported against them; the
    modules leave ``sys.modules`` with the fixture."""

    def loaded() -> list[str]:
        return [k for k in sys.modules if k.split(".")[0] == "verl" or k == "prove_plugins.train.verl_agent"]

    saved = {k: sys.modules.pop(k) for k in loaded()}
    try:
        verl_package("verl", VERL)
        verl_package("verl.experimental.agent_loop", VERL / "experimental" / "agent_loop")
        verl_module("verl.utils.rollout_trace", "utils/rollout_trace.py",
                    functions=(("utils/ray_utils.py", "get_event_loop"),))
        agent_loop = verl_module("verl.experimental.agent_loop.agent_loop", "experimental/agent_loop/agent_loop.py",
                                 leave_out={"AgentLoopManager"},  # its methods are decorated with Ray helpers
                                 functions=(("utils/ray_utils.py", "get_event_loop"),
                                            ("utils/model.py", "compute_position_id_with_mask")))
        replica = verl_module("verl.workers.rollout.replica", "workers/rollout/replica.py", only={"TokenOutput"})
        from verl.utils.dataset.rl_dataset import RLHFDataset

        agent = importlib.import_module("prove_plugins.train.verl_agent")
        assert not {"ray", "vllm", "sglang", "deepspeed", "flash_attn"} & set(sys.modules)
        assert any("ray" in line for line in agent_loop.LEFT_OUT)  # what was left out is what needs Ray
        yield types.SimpleNamespace(agent_loop=agent_loop, TokenOutput=replica.TokenOutput, RLHFDataset=RLHFDataset,
                                    agent=agent)
    finally:
        for key in loaded():
            del sys.modules[key]
        sys.modules.update(saved)


# -- the run directories ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two run directories over one synthesized corpus: ``paper`` with `prove train`'s defaults (the
    paper's numbers), ``custom`` with other numbers and a shorter sequence budget."""
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("verl")
    plugins = Plugins().load(autoload=False)
    base = {"output_dir": str(tmp), "stages": ["synth", "train"], "servers": [{"name": "banking"}]}
    paper = load_experiment({**base, "name": "paper",
                             "synth": {"examples": 20, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")},
                             "train": {"backend": "verl", "eval": {"held_out": 2},
                                       "model": {"max_tool_chars": 200, "vocab_size": 600},
                                       "options": {"launch": False}}})
    synthesize(paper, plugins, echo=lambda _: None, progress=False)
    out: dict[str, Any] = {}
    lines: list[str] = []
    summary = run_training(paper, plugins, echo=lines.append)
    out["paper"] = (Path(summary["run_dir"]), summary, lines)
    custom = load_experiment({**base, "name": "custom",
                              "train": {"backend": "verl", "corpus": str(tmp / "paper" / "synth" / "corpus.jsonl"),
                                        "steps": 20, "group_size": 8, "batch_size": 4, "kl": 0.02, "lr": 3e-7,
                                        "max_user_turns": 4, "max_assistant_turns": 6, "max_new_tokens": 48,
                                        "eval": {"held_out": 2},
                                        "model": {"path": str(tmp / "paper" / "train" / "base")},
                                        "options": {"launch": False, "gpus_per_node": 4, "max_prompt_length": 2048,
                                                    "max_response_length": 2048,
                                                    "extra_args": ["trainer.val_before_train=False"]}}})
    lines = []
    summary = run_training(custom, plugins, echo=lines.append)
    out["custom"] = (Path(summary["run_dir"]), summary, lines)
    return out


def launch_overrides(script: Path) -> list[str]:
    text = script.read_text().replace("\\\n", " ")
    command = next(line for line in text.splitlines() if "verl.trainer.main_ppo" in line)
    words = shlex.split(command)
    return words[words.index("verl.trainer.main_ppo") + 1:]


def verl_config(overrides: list[str]) -> Any:
    """verl's own trainer config (``ppo_trainer.yaml`` and its defaults, as ``main_ppo``'s ``@hydra.main``
    composes it) with ``overrides`` applied; struct mode, so an unknown key raises."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(VERL / "trainer" / "config"), version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def read_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


# -- the run directory ------------------------------------------------------------------------------------


def test_without_a_gpu_it_writes_the_run_directory_and_says_what_to_run(runs: dict[str, Any]) -> None:
    directory, summary, lines = runs["paper"]
    assert summary["ok"] and summary["launched"] is False and summary["backend"] == "verl"
    assert {p.name for p in directory.iterdir()} >= {"train.parquet", "val.parquet", "agent_loop.yaml",
                                                     "prove_setup.json", "prove_reward.py", "launch.sh"}
    assert any(line.strip() == f"bash {directory / 'launch.sh'}" for line in lines)
    assert "-m verl.trainer.main_ppo" in (directory / "launch.sh").read_text()
    setup = json.loads((directory / "prove_setup.json").read_text())
    assert setup["parser"] == "hermes" and setup["limits"] == {"max_user_turns": 5, "max_assistant_turns": 10}
    assert Path(setup["tokenizer"], "tokenizer_config.json").is_file() and "banking" in setup["server_options"]
    # The reward guard: verl's reward workers never score a PROVE row; if one ever does, it fails loudly.
    spec = importlib.util.spec_from_file_location("prove_reward", directory / "prove_reward.py")
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    with pytest.raises(RuntimeError, match="prove_agent agent loop"):
        guard.compute_score("prove/banking", "text", "{}", {})


def test_the_parquet_rows_are_in_verls_layout_and_verls_dataset_reads_them(runs: dict[str, Any], verl: Any) -> None:
    import pandas as pd
    from transformers import AutoTokenizer

    directory, _, _ = runs["paper"]
    frame = pd.read_parquet(directory / "train.parquet")
    assert set(frame.columns) == {"data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"}
    train, val = read_rows(directory / "train.parquet"), read_rows(directory / "val.parquet")
    corpus = (directory.parents[1] / "synth" / "corpus.jsonl").read_text().splitlines()
    assert len(val) == 2 and len(train) + len(val) == len(corpus)  # one row per task
    assert not {r["extra_info"]["id"] for r in train} & {r["extra_info"]["id"] for r in val}  # held out stays out
    for i, row in enumerate(train):
        example = json.loads(row["extra_info"]["example"])
        assert row["data_source"] == "prove/banking" and row["agent_name"] == "prove_agent"
        assert row["extra_info"]["index"] == i and row["extra_info"]["id"] == example["id"]
        assert row["prompt"][-1] == {"role": "user", "content": next(m["content"] for m in example["messages"]
                                                                        if m["role"] == "user")}
        assert json.loads(row["reward_model"]["ground_truth"]) == example["task"]
    cfg = verl_config(launch_overrides(directory / "launch.sh"))
    tokenizer = AutoTokenizer.from_pretrained(cfg.actor_rollout_ref.model.path)
    dataset = verl.RLHFDataset(cfg.data.train_files, tokenizer, cfg.data)  # as verl's create_rl_dataset does
    assert len(dataset) == len(train)
    item = dataset[3]
    assert item["raw_prompt"] == train[3]["prompt"] and item["index"] == 3 and item["tools_kwargs"] == {}
    assert item["agent_name"] == "prove_agent" and json.loads(item["extra_info"]["example"])["id"] == train[3]["extra_info"]["id"]


def test_the_launch_overrides_are_accepted_by_verls_own_config_with_the_papers_numbers(runs: dict[str, Any]) -> None:
    from hydra.errors import ConfigCompositionException

    directory, _, _ = runs["paper"]
    cfg = verl_config(launch_overrides(directory / "launch.sh"))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.use_kl_in_reward is False
    assert rollout.n == 16 and cfg.data.train_batch_size == 16 and actor.ppo_mini_batch_size == 16
    assert actor.use_kl_loss is True and actor.kl_loss_coef == pytest.approx(0.01) and actor.kl_loss_type == "low_var_kl"
    assert actor.optim.lr == pytest.approx(1e-6) and cfg.trainer.total_training_steps == 350
    assert rollout.multi_turn.enable is True
    assert rollout.multi_turn.max_user_turns == 5 and rollout.multi_turn.max_assistant_turns == 10
    assert rollout.agent.agent_loop_config_path == str(directory / "agent_loop.yaml")
    assert rollout.agent.default_agent_loop == "prove_agent" and rollout.mode == "async" and rollout.name == "vllm"
    assert cfg.reward.custom_reward_function.path == str(directory / "prove_reward.py")
    assert cfg.reward.reward_model.enable is False
    assert cfg.data.train_files == str(directory / "train.parquet") and cfg.data.val_files == str(directory / "val.parquet")
    rows = len(read_rows(directory / "train.parquet"))
    assert rows >= 16 and cfg.trainer.total_epochs * (rows // 16) >= 350  # verl also stops when its epochs run out
    assert list(cfg.trainer.logger) == ["console", "tensorboard"]
    assert cfg.trainer.use_v1 is True and cfg.trainer.v1.sampler.sync_refill_failed_groups is True
    # the check can fail: a misspelled key is refused by verl's config
    with pytest.raises(ConfigCompositionException):
        verl_config(["actor_rollout_ref.rollout.multi_turn.max_user_turnss=5"])


def test_the_numbers_come_from_the_train_job(runs: dict[str, Any]) -> None:
    directory, _, _ = runs["custom"]
    cfg = verl_config(launch_overrides(directory / "launch.sh"))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert rollout.n == 8 and cfg.data.train_batch_size == 4 and actor.kl_loss_coef == pytest.approx(0.02)
    assert actor.optim.lr == pytest.approx(3e-7) and cfg.trainer.total_training_steps == 20
    assert rollout.multi_turn.max_user_turns == 4 and rollout.multi_turn.max_assistant_turns == 6
    assert cfg.trainer.n_gpus_per_node == 4 and rollout.prompt_length == 2048 and rollout.response_length == 2048
    assert cfg.trainer.val_before_train is False  # extra_args come last and win
    assert cfg.trainer.total_epochs * (len(read_rows(directory / "train.parquet")) // 4) >= 20
    assert json.loads((directory / "prove_setup.json").read_text())["max_new_tokens"] == 48


# -- the agent loop ---------------------------------------------------------------------------------------


class Server:
    """Stands in for verl's server manager (``LLMServerClient.generate``): replays ``script`` (texts,
    each encoded with the tokenizer and ended with the end-of-turn token), or generates from ``model``."""

    def __init__(self, verl: Any, tokenizer: Any, *, script: list[str] | None = None, model: Any = None,
                 fail_at: int | None = None, hang_at: int | None = None) -> None:
        self.verl, self.tokenizer, self.script, self.model = verl, tokenizer, script, model
        self.fail_at, self.hang_at, self.hanging = fail_at, hang_at, False
        self.calls: list[dict[str, Any]] = []
        self.generated: list[int] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, video_data: Any = None, audio_data: Any = None,
                       mm_processor_kwargs: Any = None, **kwargs: Any) -> Any:
        if self.calls:  # the token stream only grows: each prompt extends the previous prompt and answer
            last = self.calls[-1]
            assert prompt_ids[: len(last["prompt_ids"]) + len(last["out"])] == last["prompt_ids"] + last["out"]
            assert request_id == last["request_id"]
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise RuntimeError("the rollout server went away")
        if self.hang_at is not None and len(self.calls) == self.hang_at:
            self.hanging = True
            await asyncio.sleep(3600)
        budget = sampling_params["max_tokens"]
        if self.model is not None:
            from prove_plugins.train.models.hf import Generator, Sampling

            out = Generator(self.model, self.tokenizer, Sampling(max_new_tokens=min(24, budget)))([prompt_ids])[0]
        else:
            text = self.script.pop(0) if self.script else "Done."
            out = (self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])[:budget]
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "out": out, "params": sampling_params})
        self.generated += out
        return self.verl.TokenOutput(token_ids=out, log_probs=[-0.5] * len(out), num_preempted=0,
                                     extra_fields={"min_global_steps": 3, "max_global_steps": 3 + len(self.calls)})


def call_text(call: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": call["tool"], "arguments": call["arguments"]}) + "</tool_call>"


def dataset_rows(directory: Path, verl: Any, tokenizer: Any) -> tuple[Any, list[dict[str, Any]]]:
    """verl's config from launch.sh and the training rows as verl's dataset hands them to the worker."""
    cfg = verl_config(launch_overrides(directory / "launch.sh"))
    dataset = verl.RLHFDataset(cfg.data.train_files, tokenizer, cfg.data)
    rows = []
    for i in range(len(dataset)):
        row = dict(dataset[i])
        row.pop("dummy_tensor")  # a tensor: it goes to the batch, not to the agent loop
        rows.append(row)
    return cfg, rows


def make_worker(verl: Any, cfg: Any, tokenizer: Any, server: Server) -> Any:
    """An ``AgentLoopWorker`` with what ``_run_agent_loop`` and ``_agent_loop_postprocess`` read; its
    ``__init__`` builds Ray-side objects, so the attributes are set as it sets them (agent_loop.py
    AgentLoopWorker.__init__), and the agent loop registry is filled from the yaml as it fills it."""
    from omegaconf import OmegaConf

    worker = object.__new__(verl.agent_loop.AgentLoopWorker)
    worker.config = cfg
    worker.llm_client = server
    worker.teacher_client = None
    worker.reward_loop_worker_handles = None  # no reward workers: the agent loop's reward_score stands
    worker.rollout_config = cfg.actor_rollout_ref.rollout
    worker.dataset_cls = verl.RLHFDataset
    worker.tokenizer = tokenizer
    worker.processor = None
    worker.hf_model_type = "qwen2"
    worker.mm_processor_kwargs = {}
    worker.distillation_enabled = False
    worker.tools = []
    for entry in OmegaConf.load(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        verl.agent_loop._agent_loop_registry[entry.name] = entry
    return worker


async def play(worker: Any, row: dict[str, Any], *, validate: bool = False) -> Any:
    """One rollout exactly as ``AgentLoopWorker.generate_sequences`` starts it (agent_loop.py)."""
    config = worker.rollout_config
    params = {"temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
              "repetition_penalty": 1.0, "logprobs": config.calculate_log_probs}
    trajectory = {"step": 1, "sample_index": row["index"], "rollout_n": 0, "validate": validate}
    return await worker._run_agent_loop(params, trajectory, trace=False, **row)


def live_sessions(verl: Any, directory: Path, task: dict[str, Any]) -> int:
    from prove_core.model import Task, from_json

    env = verl.agent.load_setup(str(directory / "prove_setup.json"))["environments"](from_json(task, Task))
    return sum(len(runtime) for runtime in env.runtimes.values())


@pytest.fixture(scope="module")
def tokenizer(runs: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    directory, _, _ = runs["custom"]
    return AutoTokenizer.from_pretrained(json.loads((directory / "prove_setup.json").read_text())["tokenizer"])


def unpadded(internal: Any) -> tuple[list[int], list[int], list[int]]:
    """Prompt, response and response mask of a padded ``_InternalAgentLoopOutput``."""
    prompt_width = internal.prompt_ids.shape[1]
    attention = internal.attention_mask[0].tolist()
    prompt = [t for t, a in zip(internal.prompt_ids[0].tolist(), attention[:prompt_width]) if a]
    keep = attention[prompt_width:]
    response = [t for t, a in zip(internal.response_ids[0].tolist(), keep) if a]
    mask = [m for m, a in zip(internal.response_mask[0].tolist(), keep) if a]
    return prompt, response, mask


def test_the_agent_loop_yaml_names_prove_agent_loop_and_hydra_builds_it(runs: dict[str, Any], verl: Any,
                                                                       tokenizer: Any) -> None:
    import hydra
    from omegaconf import OmegaConf

    directory, _, _ = runs["custom"]
    cfg, _ = dataset_rows(directory, verl, tokenizer)
    entries = OmegaConf.load(directory / "agent_loop.yaml")
    assert [e.name for e in entries] == ["prove_agent"]
    wrap = verl.agent_loop.DictConfigWrap

    async def build() -> Any:  # the worker instantiates inside its event loop
        return hydra.utils.instantiate(config=entries[0], trainer_config=wrap(config=cfg), server_manager=None,
                                       tokenizer=tokenizer, processor=None, hf_model_type="qwen2",
                                       dataset_cls=verl.RLHFDataset, data_config=wrap(cfg.data),
                                       tools=verl.agent_loop.ToolListWrap([]))

    loop = asyncio.run(build())
    assert isinstance(loop, verl.agent.ProveAgentLoop) and isinstance(loop, verl.agent_loop.AgentLoopBase)
    assert loop.limits.max_user_turns == 4 and loop.limits.max_assistant_turns == 6  # the launch overrides apply
    assert loop.max_new_tokens == 48 and loop.response_length == 2048


def test_a_ground_truth_episode_plays_on_a_live_session_and_earns_a_high_reward(runs: dict[str, Any], verl: Any,
                                                                               tokenizer: Any,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from prove_core.model import Task, from_json

    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = next(r for r in rows if (t := json.loads(r["extra_info"]["example"])["task"])["expected"] == "call"
               and len(t["calls"]) >= 2)
    task = json.loads(row["extra_info"]["example"])["task"]
    # Record every call the environment runs (the episode's Environment is the setup's cached one).
    env = verl.agent.load_setup(str(directory / "prove_setup.json"))["environments"](from_json(task, Task))
    executed: list[tuple[str, str, Any]] = []
    original = env.call

    def recording(session_id: str, tool: str, arguments: Any = None) -> Any:
        result = original(session_id, tool, arguments)
        executed.append((session_id, tool, result))
        return result

    monkeypatch.setattr(env, "call", recording)
    server = Server(verl, tokenizer, script=[call_text(c) for c in task["calls"]])
    worker = make_worker(verl, cfg, tokenizer, server)
    internal = asyncio.run(play(worker, row))

    # the calls ran, in order, without an error, on one session of their own, closed afterwards
    assert [tool for _, tool, _ in executed] == [c["tool"] for c in task["calls"]]
    assert all(not result.is_error for _, _, result in executed)
    sessions = {sid for sid, _, _ in executed}
    assert len(sessions) == 1 and not any(next(iter(sessions)) in rt for rt in env.runtimes.values())
    assert live_sessions(verl, directory, task) == 0

    # the reward is the PROVE reward of the whole rollout, every component reported
    info = internal.extra_fields["reward_extra_info"]
    reward = verl.agent.load_setup(str(directory / "prove_setup.json"))["reward_object"]
    assert internal.reward_score == pytest.approx(info["prove/total"]) and internal.reward_score > 1.0
    assert {f"prove/{c.name}" for c in reward.components} <= set(info)
    assert info["prove/coverage"] == pytest.approx(1.0) and info["prove/calls"] == len(task["calls"])
    assert all(isinstance(v, float) or (v is None and k.removeprefix("prove/") in reward.weights)
               for k, v in info.items())  # None: a component that does not apply (verl's metrics skip it)

    # tokens: the model's own tokens have mask 1, everything the environment added mask 0
    prompt, response, mask = unpadded(internal)
    assert prompt == server.calls[0]["prompt_ids"] and len(prompt) < cfg.actor_rollout_ref.rollout.prompt_length
    assert len(response) == len(mask) and set(mask) == {0, 1}
    assert [t for t, m in zip(response, mask) if m] == server.generated
    environment = tokenizer.decode([t for t, m in zip(response, mask) if not m])
    assert environment.count("<tool_response>") == len(task["calls"]) and "<|im_start|>tool" in environment
    assert "# Tools" in tokenizer.decode(prompt)  # the prompt carries the task's tools
    assert internal.num_turns >= 2 * len(task["calls"]) + 1
    assert internal.extra_fields["min_global_steps"] == 3 and internal.extra_fields["max_global_steps"] == 3 + len(server.calls)
    # every generation got a token budget: the run's max_new_tokens, within what is left of the response
    assert all(c["params"]["max_tokens"] == 256 for c in server.calls)


def test_later_user_turns_are_environment_tokens(runs: dict[str, Any], verl: Any, tokenizer: Any) -> None:
    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    multi = [r for r in rows if sum(m["role"] == "user" for m in json.loads(r["extra_info"]["example"])["messages"]) > 1]
    if not multi:
        pytest.skip("the corpus has no multi-turn conversation")
    row = multi[0]
    example = json.loads(row["extra_info"]["example"])
    users = [m["content"] for m in example["messages"] if m["role"] == "user"]
    server = Server(verl, tokenizer, script=[call_text(c) for c in example["task"]["calls"]])
    internal = asyncio.run(play(make_worker(verl, cfg, tokenizer, server), row))
    _, response, mask = unpadded(internal)
    environment = tokenizer.decode([t for t, m in zip(response, mask) if not m])
    assert f"<|im_start|>user\n{users[1]}" in environment
    assert users[1] not in tokenizer.decode([t for t, m in zip(response, mask) if m])


def test_a_tiny_model_generating_real_tokens_plays_whole_episodes(runs: dict[str, Any], verl: Any, tokenizer: Any) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    directory, _, _ = runs["custom"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(json.loads((directory / "prove_setup.json").read_text())["tokenizer"])
    for row in rows[:3]:
        server = Server(verl, tokenizer, model=model)
        output = asyncio.run(play(make_worker(verl, cfg, tokenizer, server), row))
        _, response, mask = unpadded(output)
        assert [t for t, m in zip(response, mask) if m] == server.generated
        assert 1 <= len(server.calls) <= 6 and output.num_turns >= 2  # max_assistant_turns = 6
        assert all(c["params"]["max_tokens"] == 48 for c in server.calls)  # the run's max_new_tokens
        assert math.isfinite(output.reward_score)
        assert output.response_logprobs is not None
        logprobs = output.response_logprobs[0].tolist()[: len(mask)]
        assert all((lp == -0.5) == bool(m) for lp, m in zip(logprobs, mask))  # the model's log-probs, 0 elsewhere
        assert live_sessions(verl, directory, json.loads(row["extra_info"]["example"])["task"]) == 0


def test_the_output_is_verls_agent_loop_output(runs: dict[str, Any], verl: Any, tokenizer: Any) -> None:
    """``run`` itself returns verl's ``AgentLoopOutput``; ``as_dict`` (what verl's TransferQueue path
    stores) puts the PROVE reward on the last response token."""
    import hydra

    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = next(r for r in rows if json.loads(r["extra_info"]["example"])["task"]["expected"] == "call")
    task = json.loads(row["extra_info"]["example"])["task"]
    worker = make_worker(verl, cfg, tokenizer, Server(verl, tokenizer, script=[call_text(c) for c in task["calls"]]))
    wrap = verl.agent_loop.DictConfigWrap

    async def run() -> Any:
        loop = hydra.utils.instantiate(config=verl.agent_loop._agent_loop_registry["prove_agent"],
                                       trainer_config=wrap(config=cfg), server_manager=worker.llm_client,
                                       tokenizer=tokenizer, processor=None, hf_model_type="qwen2",
                                       dataset_cls=verl.RLHFDataset, data_config=wrap(cfg.data),
                                       tools=verl.agent_loop.ToolListWrap([]))
        return await loop.run({"temperature": 1.0, "logprobs": True}, session_id=0, uid="u", **row)

    output = asyncio.run(run())
    assert isinstance(output, verl.agent_loop.AgentLoopOutput)
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    fields = output.as_dict()
    assert fields["rm_scores"][-1].item() == pytest.approx(output.reward_score) and fields["rm_scores"][:-1].abs().sum() == 0
    assert fields["metrics"]["generate_sequences"] >= 0 and fields["metrics"]["num_preempted"] == 0


def test_the_session_is_closed_when_generation_raises(runs: dict[str, Any], verl: Any, tokenizer: Any) -> None:
    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = next(r for r in rows if json.loads(r["extra_info"]["example"])["task"]["expected"] == "call")
    task = json.loads(row["extra_info"]["example"])["task"]
    server = Server(verl, tokenizer, script=[call_text(c) for c in task["calls"]], fail_at=1)
    with pytest.raises(RuntimeError, match="server went away"):
        asyncio.run(play(make_worker(verl, cfg, tokenizer, server), row))
    assert len(server.calls) == 1  # the first turn ran (and its call executed) before the failure
    assert live_sessions(verl, directory, task) == 0


def test_a_cancelled_rollout_closes_its_session(runs: dict[str, Any], verl: Any, tokenizer: Any) -> None:
    """verl's asynchronous trainers abort rollouts: the episode's thread ends and closes the session."""
    import time

    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = next(r for r in rows if json.loads(r["extra_info"]["example"])["task"]["expected"] == "call")
    task = json.loads(row["extra_info"]["example"])["task"]
    server = Server(verl, tokenizer, script=[call_text(c) for c in task["calls"]], hang_at=1)

    async def main() -> None:
        rollout = asyncio.create_task(play(make_worker(verl, cfg, tokenizer, server), row))
        while not server.hanging:
            await asyncio.sleep(0.01)
        assert live_sessions(verl, directory, task) == 1
        rollout.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rollout
        # the event loop goes on (as a verl worker's does) and the episode's thread ends by itself
        deadline = time.monotonic() + 10
        while live_sessions(verl, directory, task) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert live_sessions(verl, directory, task) == 0

    asyncio.run(main())


def test_a_group_of_rollouts_plays_concurrently_each_on_its_own_session(runs: dict[str, Any], verl: Any,
                                                                       tokenizer: Any) -> None:
    """GRPO's group: the same row played n times at once on one event loop, as verl's worker does."""
    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = next(r for r in rows if json.loads(r["extra_info"]["example"])["task"]["expected"] == "call")
    task = json.loads(row["extra_info"]["example"])["task"]
    servers = [Server(verl, tokenizer, script=[call_text(c) for c in task["calls"]] if k % 2 == 0 else ["No."])
               for k in range(4)]

    async def group() -> list[Any]:
        return list(await asyncio.gather(*(play(make_worker(verl, cfg, tokenizer, s), row) for s in servers)))

    outputs = asyncio.run(group())
    requests = {s.calls[0]["request_id"] for s in servers}
    assert len(requests) == 4  # each rollout its own request (and session)
    assert outputs[0].reward_score == pytest.approx(outputs[2].reward_score)
    assert outputs[0].reward_score > outputs[1].reward_score  # the ground truth beats a refusal
    best, refusal = (o.extra_fields["reward_extra_info"] for o in outputs[:2])
    assert best["prove/total"] == pytest.approx(best["prove/best"]) and refusal["prove/calls"] == 0.0
    assert best["prove/abstention"] is None  # a call task: abstaining is not what is scored
    assert live_sessions(verl, directory, task) == 0


@pytest.mark.parametrize("what", ["schema", "state"])
def test_a_drifted_task_fails_the_rollout_with_task_drift(runs: dict[str, Any], verl: Any, tokenizer: Any,
                                                         what: str) -> None:
    from prove_core.env.drift import TaskDrift

    directory, _, _ = runs["paper"]
    cfg, rows = dataset_rows(directory, verl, tokenizer)
    row = rows[0]
    example = json.loads(row["extra_info"]["example"])
    assert example["task"]["meta"]["schema_hash"] and example["task"]["initial_state_hash"]  # checked by default
    if what == "schema":
        example["task"]["meta"]["schema_hash"] = "0" * 20  # the servers' tools changed since
    else:
        example["task"]["initial_state_hash"] = "banking:" + "0" * 64  # other seed data
    row = {**row, "extra_info": {**row["extra_info"], "example": json.dumps(example)}}
    server = Server(verl, tokenizer, script=[])
    with pytest.raises(TaskDrift) as err:
        asyncio.run(play(make_worker(verl, cfg, tokenizer, server), row))
    assert err.value.what == what and server.calls == []  # not a single token generated for it
    assert live_sessions(verl, directory, example["task"]) == 0
    # the same row, undrifted, plays
    ok = asyncio.run(play(make_worker(verl, cfg, tokenizer, Server(verl, tokenizer, script=[])), rows[0]))
    assert math.isfinite(ok.reward_score)


def test_the_documented_run_writes_the_run_directory_as_written(tmp_path: Path) -> None:
    """docs/integrations.md's verl "Running it" block, run with bash as written (all but its first
    line, the cluster's pip install), with this environment's `prove` on PATH."""
    import os
    import subprocess
    import sys

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    section = text[text.index("## verl"):]
    section = section[section.index("### Running it"):]
    block = section[section.index("```bash") + len("```bash"):]
    block = block[: block.index("```")].strip("\n")
    first, _, rest = block.partition("\n")
    assert first.startswith("pip install") and "prove train verl_demo.toml" in rest
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PROVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", rest], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "runs" / "verl_demo" / "train" / "verl"
    assert {p.name for p in run.iterdir()} >= {"train.parquet", "val.parquet", "agent_loop.yaml", "launch.sh"}
    assert f"bash {run / 'launch.sh'}" in done.stdout + done.stderr
