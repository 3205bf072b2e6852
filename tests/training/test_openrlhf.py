"""The OpenRLHF backend on CPU: the launch flags are accepted by the installed OpenRLHF's own argument
parser (built from its source, without importing ray, vllm or deepspeed), and the generated agent file
plays whole episodes through OpenRLHF's own executor classes with a stand-in engine that really
generates from a tiny local model."""

import ast
import asyncio
import importlib.util
import json
import shlex
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the openrlhf backend's checks need torch (pip install torch==2.13.0)")
pytest.importorskip("openrlhf", reason="install OpenRLHF without its GPU dependencies: pip install --no-deps openrlhf")
pytest.importorskip("openrlhf.utils.agent", reason="openrlhf.utils.agent needs aiohttp and pylatexenc")

from prove_core.config import load_experiment  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.train.core import run_training  # noqa: E402


def openrlhf_parser():
    """OpenRLHF's own ArgumentParser for train_ppo_ray, built from its source (the statements of its
    __main__ block up to parse_args), so ray, vllm and deepspeed are never imported."""
    path = Path(importlib.util.find_spec("openrlhf").origin).parent / "cli" / "train_ppo_ray.py"
    tree = ast.parse(path.read_text())
    main = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    # the module's own imports, except the heavy ones (ray, and openrlhf's trainers that import it)
    body = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
            and not any(x in ast.unparse(n) for x in ("ray", "openrlhf"))]
    for stmt in main.body:
        if "parse_args" in ast.unparse(stmt):
            break
        body.append(stmt)
    module = ast.Module(body=body, type_ignores=[])
    scope = {}
    exec(compile(module, str(path), "exec"), scope)
    assert not {"ray", "vllm", "deepspeed"} & set(sys.modules)
    return scope["parser"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("orl")
    exp = {"name": "o", "output_dir": str(tmp), "stages": ["synth", "train"], "servers": [{"name": "banking"}],
           "synth": {"examples": 12, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")},
           "train": {"backend": "openrlhf", "steps": 20, "group_size": 8, "batch_size": 4, "kl": 0.02, "lr": 3e-7,
                     "eval": {"held_out": 2}, "model": {"max_tool_chars": 200, "vocab_size": 600},
                     "options": {"vllm_engines": 2, "gpus_per_node": 4, "launch": False}}}
    experiment = load_experiment(exp)
    plugins = Plugins().load(autoload=False)
    synthesize(experiment, plugins, echo=lambda _: None, progress=False)
    lines = []
    summary = run_training(experiment, plugins, echo=lines.append)
    return Path(summary["run_dir"]), summary, lines


def launch_flags(script: Path) -> list[str]:
    text = script.read_text().replace("\\\n", " ")
    command = next(line for line in text.splitlines() if line.startswith("ray job submit"))
    words = shlex.split(command)
    return words[words.index("openrlhf.cli.train_ppo_ray") + 1:]


def test_without_ray_it_writes_the_run_directory_and_says_what_to_run(run):
    directory, summary, lines = run
    assert summary["ok"] and summary["launched"] is False
    assert {p.name for p in directory.iterdir()} >= {"prompts.jsonl", "agent.py", "prove_setup.json", "launch.sh"}
    assert any(line.strip() == f"bash {directory / 'launch.sh'}" for line in lines)
    assert "ray job submit" in (directory / "launch.sh").read_text()
    rows = [json.loads(line) for line in (directory / "prompts.jsonl").read_text().splitlines()]
    assert rows and rows[0]["input"][-1]["role"] == "user" and "task" in json.loads(rows[0]["label"])["example"]


def test_the_launch_flags_are_accepted_by_openrlhfs_own_parser(run):
    directory, _, _ = run
    parser = openrlhf_parser()
    args = parser.parse_args(launch_flags(directory / "launch.sh"))  # exits (SystemExit) on an unknown flag
    values = vars(args)
    assert values["algo.advantage.estimator"] == "group_norm"
    assert values["rollout.n_samples_per_prompt"] == 8 and values["rollout.batch_size"] == 4
    assert values["algo.kl.use_loss"] and values["algo.kl.init_coef"] == pytest.approx(0.02)
    assert values["actor.adam.lr"] == pytest.approx(3e-7) and values["vllm.num_engines"] == 2
    assert values["train.agent_func_path"] == str(directory / "agent.py")
    assert values["data.apply_chat_template"] and values["data.label_key"] == "label"
    with pytest.raises(SystemExit):  # the check can fail: a misspelled flag is rejected
        parser.parse_args(["--algo.advantage.estimatorr", "group_norm"])


def test_the_prompts_launch_sh_names_show_the_policy_its_tools(run):
    """OpenRLHF's own prompt pipeline (``blending_datasets`` and ``PromptDataset``, as its PPO trainer's
    ``prepare_datasets`` calls them) with the launch.sh flags, parsed by OpenRLHF's parser: every
    prompt it renders with ``--data.apply_chat_template`` carries each of the task's tool schemas."""
    from openrlhf.datasets import PromptDataset
    from openrlhf.datasets.utils import blending_datasets
    from openrlhf.utils.config import hierarchize
    from transformers import AutoTokenizer

    directory, _, _ = run
    args = hierarchize(openrlhf_parser().parse_args(launch_flags(directory / "launch.sh")))
    strategy = type("Strategy", (), {"args": args, "is_rank_0": lambda self: True, "print": lambda self, *a: None})()
    data = blending_datasets(args.data.prompt_dataset, args.data.prompt_probs, strategy, args.train.seed,
                             max_count=args.data.max_samples, dataset_split=args.data.prompt_split)
    tokenizer = AutoTokenizer.from_pretrained(json.loads((directory / "prove_setup.json").read_text())["tokenizer"])
    prompts = PromptDataset(data, tokenizer, strategy, input_template=args.data.input_template)
    rows = [json.loads(line) for line in (directory / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == len(rows)
    for i, row in enumerate(rows):
        _, prompt, label, _ = prompts[i]
        assert label == row["label"]
        tools = json.loads(label)["example"]["tools"]
        assert tools and all(json.dumps(tool, ensure_ascii=False) in prompt for tool in tools)


class Output:
    def __init__(self, token_ids, text, finish_reason):
        self.token_ids, self.text, self.finish_reason, self.logprobs = token_ids, text, finish_reason, None


class TinyEngine:
    """Stands in for a vLLM engine: generates from a real (tiny, local) model."""

    def __init__(self, model, tokenizer):
        from prove_plugins.train.models.hf import Generator, Sampling

        self.tokenizer = tokenizer
        self.generator = Generator(model, tokenizer, Sampling(max_new_tokens=40, temperature=1.0))
        self.calls = 0

    async def generate(self, token_ids, sampling_params, multi_modal_data=None):
        self.calls += 1
        new = self.generator([token_ids])[0]
        ended = bool(new) and new[-1] == self.tokenizer.eos_token_id
        text = self.tokenizer.decode(new[:-1] if ended else new, skip_special_tokens=False)
        return type("RequestOutput", (), {"outputs": [Output(new, text, "stop" if ended else "length")]})()


class Params:
    def __init__(self):
        self.max_tokens, self.logprobs, self.temperature = 40, None, 1.0


def test_the_agent_file_plays_whole_episodes_through_openrlhfs_executor(run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, _, _ = run
    setup = json.loads((directory / "prove_setup.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(setup["tokenizer"])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(setup["tokenizer"])
    # load the agent exactly as OpenRLHF's vllm_engine._load_agent_executor does
    spec = importlib.util.spec_from_file_location("agent_module", str(directory / "agent.py"))
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    from openrlhf.utils.agent import AgentExecutorBase, MultiTurnAgentExecutor

    executor = agent.AgentExecutor()
    assert isinstance(executor, MultiTurnAgentExecutor) and isinstance(executor, AgentExecutorBase)
    rows = [json.loads(line) for line in (directory / "prompts.jsonl").read_text().splitlines()]
    engine = TinyEngine(model, tokenizer)
    for row in rows[:3]:
        prompt = tokenizer.apply_chat_template(row["input"], tokenize=False, add_generation_prompt=True)
        out = asyncio.run(executor.execute(prompt, row["label"], Params(), 1500, tokenizer, engine))
        text = tokenizer.decode(out["observation_tokens"], skip_special_tokens=False)
        assert "# Tools" in text  # the agent re-rendered the prompt with the task's tools
        assert len(out["action_ranges"]) >= 1 and isinstance(out["reward"], float)
        for start, end in out["action_ranges"]:
            assert 0 < start <= end <= len(out["observation_tokens"])
        example = json.loads(row["label"])["example"]
        users = [m["content"] for m in example["messages"] if m["role"] == "user"]
        assert users[0] in text
        if len(out["action_ranges"]) > 1 and len(users) > 1:
            assert "<|im_start|>user" in tokenizer.decode(out["observation_tokens"][out["action_ranges"][0][1]:])
        assert set(out["extra_logs"]) >= {"prove/calls"}
    assert engine.calls >= 3


def test_a_scripted_engine_gets_the_ground_truths_reward(run):
    """An engine that answers with the ground-truth calls earns the best reward: the reward really
    comes from executing the calls on the episode's live session."""
    from prove_plugins.train.openrlhf_agent import Episode

    directory, _, _ = run
    rows = [json.loads(line) for line in (directory / "prompts.jsonl").read_text().splitlines()]
    row = next(r for r in rows if json.loads(r["label"])["example"]["task"]["expected"] == "call")
    task = json.loads(row["label"])["example"]["task"]
    episode = Episode(str(directory / "prove_setup.json"), row["label"])
    observation = episode.start()
    assert observation.endswith("<|im_start|>assistant\n")
    done, reward = False, 0.0
    calls = list(task["calls"])
    for _ in range(30):
        if calls:
            call = calls.pop(0)
            text = "<tool_call>" + json.dumps({"name": call["tool"], "arguments": call["arguments"]}) + "</tool_call>"
        else:
            text = "Done."
        feedback, done, reward, logs = episode.act(text)
        if done:
            break
        assert feedback.endswith("<|im_start|>assistant\n")
    assert done and logs["prove/coverage"] == pytest.approx(1.0) and reward > 1.0


@pytest.mark.parametrize("tamper", ["schema", "state"])
def test_a_drifted_task_fails_the_episode_before_anything_is_played(run, tamper):
    """A task record whose schema or seed-state hash the live servers no longer produce fails the
    episode with TaskDrift at its start, instead of playing a prompt whose ids or tools are gone."""
    from prove_core.env.drift import TaskDrift
    from prove_plugins.train.openrlhf_agent import Episode

    directory, _, _ = run
    row = json.loads((directory / "prompts.jsonl").read_text().splitlines()[0])
    label = json.loads(row["label"])
    task = label["example"]["task"]
    if tamper == "schema":
        task["meta"]["schema_hash"] = "0" * 20
    else:
        task["initial_state_hash"] = "banking:" + "0" * 64
    episode = Episode(str(directory / "prove_setup.json"), json.dumps(label))
    with pytest.raises(TaskDrift) as caught:
        episode.start()
    assert caught.value.what == tamper
