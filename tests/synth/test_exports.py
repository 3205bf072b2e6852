"""The trainer exports, run in the trainers themselves (CPU, tiny models, no hub): TRL's SFTTrainer
trains on ``sft.jsonl`` with a loss on assistant tokens only (mistakes excluded), TRL's GRPOTrainer
reads ``rl.jsonl``, OpenRLHF's own prompt dataset shows the policy its tools from
``openrlhf.jsonl``, every row renders with real Hermes (Qwen2.5) and Llama 3.1 chat templates with
its exact arguments and schemas, and ``datasets`` (the installed one and the lowest the extras
allow) loads every file exactly."""

import copy
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from prove_core.model import read_jsonl
from prove_core.synth.exporters import EXPORTERS, export, sft_examples, with_tools_in_system
from prove_core.synth.pipeline import synthesize
from tests.synth.conftest import experiment

ROOT = Path(__file__).resolve().parents[2]
MARK = "acc_WRONG_ON_PURPOSE"  # the argument of the injected mistake: must never be a training target
FILES = ("sft.jsonl", "rl.jsonl", "openrlhf.jsonl", "corpus.jsonl")


def with_a_mistake(record):
    """``record`` with a deliberately wrong call (``"mistake": true``), its error and the recovery
    inserted before its second tool call, as the synthesis perturbation writes them."""
    record = copy.deepcopy(record)
    calls = [i for i, m in enumerate(record["messages"]) if m["role"] == "assistant" and m["tool_calls"]]
    at = calls[1]
    name = record["messages"][at]["tool_calls"][0]["name"]
    blank = {"content": None, "name": None, "tool_call_id": None, "tool_calls": []}
    record["messages"][at:at] = [
        {**blank, "role": "assistant", "mistake": True,
         "tool_calls": [{"id": "call_wrong", "name": name, "arguments": {"account_id": MARK}}]},
        {**blank, "role": "tool", "name": name, "tool_call_id": "call_wrong",
         "content": '{"code": "INVALID_ARGUMENT", "message": "invalid arguments"}'},
        {**blank, "role": "assistant", "content": "I sent that incorrectly. Retrying with the right values."},
    ]
    return record


@pytest.fixture(scope="module")
def exported(tmp_path_factory, plugins):
    """A synthesized banking + shopping corpus, one record with an injected mistake, every export."""
    tmp = tmp_path_factory.mktemp("exports")
    synthesize(experiment(tmp, examples=16, exports=[]), plugins, echo=lambda _: None, progress=False)
    records = list(read_jsonl(tmp / "t" / "synth" / "corpus.jsonl"))
    target = next(i for i, r in enumerate(records)
                  if sum(bool(m["tool_calls"]) for m in r["messages"] if m["role"] == "assistant") >= 2)
    records[target] = with_a_mistake(records[target])
    out = tmp / "out"
    out.mkdir()
    corpus = out / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    formats = ["sft", "rl", "openrlhf"]
    if _has_datasets_json():
        formats.append("hf")
    for fmt in formats:
        export(fmt, corpus, out)
    rows = {name: [json.loads(line) for line in (out / name).read_text().splitlines()] for name in FILES}
    return SimpleNamespace(dir=out, records=records, rows=rows, mistake_id=records[target]["id"])


def _has_datasets_json():
    try:
        import datasets
    except ImportError:
        return False
    return hasattr(datasets, "Json")


def trainable(record):
    """The assistant turns of ``record`` a model should learn: after the first user turn, not mistakes."""
    first = next(i for i, m in enumerate(record["messages"]) if m["role"] == "user")
    return [m for m in record["messages"][first + 1:] if m["role"] == "assistant" and not m.get("mistake")]


def dumps(rows):
    return [json.dumps(r, ensure_ascii=False) for r in rows]


# -- the rows themselves -----------------------------------------------------------------------------

def test_sft_rows_train_every_assistant_turn_once_and_a_mistake_never(exported):
    rows = exported.rows["sft.jsonl"]
    assert rows
    for row in rows:
        assert set(row) == {"id", "group", "prompt", "completion", "tools"}
        assert row["prompt"] and row["completion"]  # no empty rows (TRL's is_conversational indexes [0])
        assert row["prompt"][-1]["role"] in ("user", "tool") and row["prompt"][0]["role"] == "system"
        assert row["completion"][0]["role"] == "assistant" and row["completion"][-1]["role"] == "assistant"
        for message in row["prompt"] + row["completion"]:
            assert "mistake" not in message and message.get("tool_calls") != []
            assert all(v is not None for k, v in message.items() if k != "content")  # no null placeholders
            for call in message.get("tool_calls", []):
                assert isinstance(call["function"]["arguments"], dict)  # objects, not JSON strings
        assert all(isinstance(t, dict) for t in row["tools"])
    for record in exported.records:
        own = [r for r in rows if r["id"] == record["id"] or r["id"].startswith(record["id"] + "#")]
        trained = [m for r in own for m in r["completion"] if m["role"] == "assistant"]
        want = trainable(record)
        assert [(m.get("content"), [c["function"]["arguments"] for c in m.get("tool_calls", [])]) for m in trained] \
            == [(m["content"], [c["arguments"] for c in m["tool_calls"]]) for m in want], record["id"]
    split = [r for r in rows if r["id"].startswith(exported.mistake_id + "#")]
    assert [r["id"] for r in split] == [exported.mistake_id + "#0", exported.mistake_id + "#1"]
    assert MARK not in json.dumps(split[0]) and MARK not in json.dumps([r["completion"] for r in split])
    assert MARK in json.dumps(split[1]["prompt"])  # the mistake is context for the recovery
    assert split[1]["completion"][0]["content"].startswith("I sent that incorrectly")


def test_a_record_whose_only_assistant_turn_is_a_mistake_gives_no_row():
    record = {"id": "x", "tools": [], "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "mistake": True,
         "tool_calls": [{"id": "c", "name": "t", "arguments": {}}]},
        {"role": "tool", "content": "{}", "tool_call_id": "c", "name": "t"}]}
    assert sft_examples(record) == []
    assert sft_examples({**record, "messages": record["messages"][:2]}) == []


def test_rl_and_openrlhf_rows_carry_the_first_turn_the_tools_and_the_task(exported):
    rl, orl = exported.rows["rl.jsonl"], exported.rows["openrlhf.jsonl"]
    assert [r["id"] for r in rl] == [r["id"] for r in orl] == [r["id"] for r in exported.records]
    for record, row, prompt in zip(exported.records, rl, orl, strict=True):
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][-1]["content"] == next(m["content"] for m in record["messages"] if m["role"] == "user")
        assert row["tools"] == record["tools"] and row["task"] == record["task"]
        assert prompt["input"] == with_tools_in_system(row["prompt"], row["tools"])
        assert json.loads(prompt["label"]) == {"example": record}
        assert set(prompt) == {"id", "input", "label"}


def test_the_exporters_import_neither_torch_nor_datasets_and_old_names_still_work(exported, tmp_path):
    code = ("import sys, prove_core.synth.exporters; "
            "print(sorted(m for m in ('torch', 'datasets', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    from prove_core.config import SynthConfig

    assert SynthConfig().exports == ["sft", "rl", "openrlhf"]
    assert set(EXPORTERS) == {"sft", "rl", "openrlhf", "hf", "trl"}
    export("trl", exported.dir / "corpus.jsonl", tmp_path)  # the old name writes the files that replaced trl.jsonl
    assert (tmp_path / "sft.jsonl").read_text() == (exported.dir / "sft.jsonl").read_text()
    assert (tmp_path / "rl.jsonl").read_text() == (exported.dir / "rl.jsonl").read_text()


# -- datasets ----------------------------------------------------------------------------------------

LOAD = """
import json, sys
import datasets
datasets.disable_progress_bars()
out = sys.argv[1]
loaded = {name: [json.dumps(r, ensure_ascii=False) for r in
                 datasets.load_dataset("json", data_files=f"{out}/{name}", split="train")] for name in FILES}
if hasattr(datasets, "Json"):
    for name in ("sft", "rl"):
        loaded[f"hf/{name}"] = [json.dumps(r, ensure_ascii=False) for r in datasets.load_from_disk(f"{out}/hf")[name]]
print(json.dumps({"version": datasets.__version__, "rows": loaded}))
""".replace("FILES", repr(FILES))


def check_loaded(result, exported):
    """Every row ``datasets`` returned is the row in the file: the same keys in the same order, no
    ``null`` for a key another row has, ints still ints."""
    for name in FILES:
        assert result["rows"][name] == dumps(exported.rows[name]), f"datasets {result['version']} changed {name}"
    if "hf/sft" in result["rows"]:
        assert result["rows"]["hf/sft"] == dumps(exported.rows["sft.jsonl"])
        assert result["rows"]["hf/rl"] == dumps(exported.rows["rl.jsonl"])


def test_datasets_loads_every_export_exactly(exported):
    pytest.importorskip("datasets")
    out = subprocess.run([sys.executable, "-c", LOAD, str(exported.dir)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert "hf/sft" in result["rows"]
    check_loaded(result, exported)


def test_the_hf_export_names_the_datasets_it_needs(exported, tmp_path, monkeypatch):
    from prove_core.errors import ConfigError

    monkeypatch.setitem(sys.modules, "datasets", SimpleNamespace(__version__="3.6.0"))  # no Json type
    with pytest.raises(ConfigError, match=r"needs datasets>=4\.7 \(found 3\.6\.0\)"):
        export("hf", exported.dir / "corpus.jsonl", tmp_path)


def lowest_datasets():
    """The lowest ``datasets`` the extras allow (the train and test extras must agree)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    bounds = {extra: next(re.fullmatch(r"datasets>=([\d.]+)", d.replace(" ", "")).group(1)
                          for d in extras[extra] if d.startswith("datasets")) for extra in ("train", "test")}
    assert bounds["train"] == bounds["test"], bounds
    return bounds["train"]


@pytest.mark.slow
def test_the_lowest_datasets_the_extras_allow_loads_every_export_exactly(exported, tmp_path):
    """pip-installs ``datasets==<lower bound>`` beside the environment and loads every file with it:
    the bound in pyproject.toml is only as low as this passes."""
    from packaging.version import Version

    version = lowest_datasets()
    target = tmp_path / "lowest"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                          f"datasets=={version}"], capture_output=True, text=True)
    if pip.returncode:
        pytest.skip(f"pip install datasets=={version} failed: {pip.stderr.strip()[-300:]}")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", LOAD, str(exported.dir)], capture_output=True, text=True,
                         cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert Version(result["version"]) == Version(version) and "hf/sft" in result["rows"]
    check_loaded(result, exported)


# -- chat templates ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer(exported):
    """A tokenizer trained on the corpus, with Qwen2.5's real chat template (Hermes tool calling) as
    TRL ships it; Llama 3.1's is passed per call."""
    pytest.importorskip("trl", reason="needs the train extra: pip install torch==2.13.0 && pip install -e '.[train]'")
    from trl.chat_template_utils import qwen2_5_chat_template

    from prove_plugins.train.models.tiny import train_tokenizer

    lines = (exported.dir / "corpus.jsonl").read_text().splitlines()
    return train_tokenizer(lines, vocab_size=2000, template=qwen2_5_chat_template, model_max_length=1 << 16)


def templates():
    from trl.chat_template_utils import llama3_1_chat_template, qwen2_5_chat_template

    return {"hermes": qwen2_5_chat_template, "llama3.1": llama3_1_chat_template}


def calls_of(messages):
    return [c["function"] for m in messages for c in m.get("tool_calls", [])]


def test_every_row_renders_with_its_exact_arguments_and_schemas_after_a_datasets_round_trip(exported, tokenizer):
    import datasets

    datasets.disable_progress_bars()
    load = {name: datasets.load_dataset("json", data_files=str(exported.dir / name), split="train")
            for name in ("sft.jsonl", "rl.jsonl", "openrlhf.jsonl")}
    for name in ("sft", "rl"):
        load[f"hf/{name}"] = datasets.load_from_disk(str(exported.dir / "hf"))[name]
    rendered = 0
    for style, template in templates().items():
        def render(messages, tools, template=template, **kw):
            return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False, **kw)

        for name, files in (("sft.jsonl", ("sft.jsonl", "hf/sft")), ("rl.jsonl", ("rl.jsonl", "hf/rl")),
                            ("openrlhf.jsonl", ("openrlhf.jsonl",))):
            for source in files:
                for row, original in zip(load[source], exported.rows[name], strict=True):
                    if name == "openrlhf.jsonl":
                        messages, tools, want = row["input"], None, render(original["input"], None,
                                                                           add_generation_prompt=True)
                    else:
                        messages = row["prompt"] + row.get("completion", [])
                        tools = row["tools"]
                        want = render(original["prompt"] + original.get("completion", []), original["tools"],
                                      add_generation_prompt="completion" not in row)
                    if style == "llama3.1" and any(len(m.get("tool_calls", [])) > 1 for m in messages):
                        continue  # Llama 3.1's template raises on parallel calls, whatever the data
                    text = render(messages, tools, add_generation_prompt="completion" not in row)
                    assert text == want, (style, source, row["id"])
                    rendered += 1
                    for call in calls_of(messages):  # arguments serialized once, exactly as recorded
                        arguments = json.dumps(call["arguments"], ensure_ascii=False)
                        key = '"arguments": ' if style == "hermes" else '"parameters": '
                        assert f'"name": "{call["name"]}", {key}{arguments}' in text
                    for tool in row.get("tools", []):  # every schema whole (openrlhf rows carry theirs in input)
                        assert json.dumps(tool, ensure_ascii=False, indent=None if style == "hermes" else 4) in text
                    assert '"arguments": "{' not in text and '"parameters": "{' not in text
    assert rendered > 3 * len(exported.rows["sft.jsonl"])


# -- TRL ---------------------------------------------------------------------------------------------

def qwen_assistant_text(message):
    """An assistant turn as Qwen2.5's template writes it, from the newline after the role to the
    end-of-turn: the text its training template marks for the loss."""
    text = "\n" + message["content"] if message.get("content") else ""
    for call in calls_of([message]):
        text += ('\n<tool_call>\n{"name": "' + call["name"] + '", "arguments": '
                 + json.dumps(call["arguments"], ensure_ascii=False) + "}\n</tool_call>")
    return text + "<|im_end|>\n"


def trained_spans(tokenizer, input_ids, labels):
    spans, current = [], []
    for token, label in zip(input_ids, labels, strict=True):
        if label != -100:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return [tokenizer.decode(span, skip_special_tokens=False) for span in spans]


def test_trl_sft_trainer_trains_on_assistant_tokens_only(exported, tokenizer, tmp_path, capsys):
    """SFTTrainer with ``assistant_only_loss=True`` on sft.jsonl as datasets loads it: TRL swaps in its
    Qwen2.5 training template (as for a real Qwen2.5 model), and the tokens with a label, decoded,
    are exactly the assistant turns of each completion: no system prompt, no tool schema, no tool
    result, no user turn, never the injected mistake. Then it trains two steps."""
    import datasets
    import torch
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import qwen2_5_training_chat_template

    from prove_plugins.train.models.tiny import build_tiny_model

    datasets.disable_progress_bars()
    data = datasets.load_dataset("json", data_files=str(exported.dir / "sft.jsonl"), split="train")
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, max_positions=1 << 15)
    args = SFTConfig(output_dir=str(tmp_path / "sft"), assistant_only_loss=True, max_length=None, max_steps=2,
                     per_device_train_batch_size=1, use_cpu=True, report_to="none", save_strategy="no",
                     logging_steps=1, disable_tqdm=True, seed=0)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    assert trainer.chat_template == qwen2_5_training_chat_template
    total = trained = 0
    for row, original in zip(trainer.train_dataset, exported.rows["sft.jsonl"], strict=True):
        spans = trained_spans(tokenizer, row["input_ids"], row["labels"])
        want = [qwen_assistant_text(m) for m in original["completion"] if m["role"] == "assistant"]
        assert [s.strip() for s in spans] == [w.strip() for w in want], original["id"]
        joined = "".join(spans)
        assert "<tool_response>" not in joined and "<tools>" not in joined and MARK not in joined
        total += len(row["input_ids"])
        trained += sum(label != -100 for label in row["labels"])
    mistake = next(r for r in trainer.train_dataset if r["id"] == exported.mistake_id + "#1")
    assert MARK in tokenizer.decode(mistake["input_ids"])  # in the context, not in the loss
    with capsys.disabled():
        print(f"\nSFT: {len(trainer.train_dataset)} rows, {total} tokens, {trained} with a label "
              f"({trained / total:.1%})")

    # hf/sft prepares to the very same tokens and labels
    hf = SFTTrainer(model=model, args=args, train_dataset=datasets.load_from_disk(str(exported.dir / "hf"))["sft"],
                    processing_class=tokenizer).train_dataset
    assert hf["input_ids"] == trainer.train_dataset["input_ids"] and hf["labels"] == trainer.train_dataset["labels"]

    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))


def test_trl_grpo_trainer_reads_the_rl_export(exported, tokenizer, tmp_path):
    """GRPOTrainer on rl.jsonl as datasets loads it, one step. TRL renders prompts with the trainer's
    own ``tools=`` only, so the documented map writes each row's tools into its system message
    first; the prompts it samples are then the rows' prompts with their tools, and every reward
    function gets the row's exact task record and tools."""
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    from prove_plugins.train.models.tiny import build_tiny_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    datasets.disable_progress_bars()
    data = datasets.load_dataset("json", data_files=str(exported.dir / "rl.jsonl"), split="train")
    data = data.map(lambda row: {"prompt": with_tools_in_system(row["prompt"], row["tools"])})  # docs/exports.md
    rows = {r["id"]: r for r in exported.rows["rl.jsonl"]}
    seen = []

    def expected_behaviour(prompts, completions, task, tools, id, **_):
        for prompt, one_task, one_tools, key in zip(prompts, task, tools, id, strict=True):
            assert prompt == with_tools_in_system(rows[key]["prompt"], rows[key]["tools"])
            assert json.dumps(one_task) == json.dumps(rows[key]["task"])
            assert json.dumps(one_tools) == json.dumps(rows[key]["tools"])
            seen.append(key)
        return [float(t["expected"] == "call") for t in task]

    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, max_positions=1 << 15)
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=4, beta=0.0, use_cpu=True, report_to="none", save_strategy="no",
                      logging_steps=1, disable_tqdm=True, bf16=False, seed=0)
    trainer = GRPOTrainer(model=model, reward_funcs=[expected_behaviour], args=args, train_dataset=data,
                          processing_class=tokenizer)
    assert trainer.train().global_step == 1
    assert len(seen) == 4 and len(set(seen)) == 2  # two prompts, two generations each
    # the tokens TRL fed the model: the two prompts with their tool schemas, rendered by the template
    shown = sum(len(tokenizer.apply_chat_template(with_tools_in_system(rows[k]["prompt"], rows[k]["tools"]),
                                                  add_generation_prompt=True, tokenize=True, return_dict=False))
                for k in seen)
    assert shown <= trainer.state.log_history[0]["num_tokens"] <= shown + 4 * 4


# -- OpenRLHF ----------------------------------------------------------------------------------------

class Strategy:
    """What OpenRLHF's dataset helpers read of its DeepSpeed strategy."""

    def __init__(self, args):
        self.args = args

    def is_rank_0(self):
        return True

    def print(self, *args):
        pass


def openrlhf_prompts(path, tokenizer, *, input_key="input", label_key="label"):
    """OpenRLHF's own prompt pipeline, as its PPO trainer's ``prepare_datasets`` runs it for
    ``--data.prompt_dataset PATH --data.input_key input --data.label_key label
    --data.apply_chat_template`` (without Ray)."""
    pytest.importorskip("openrlhf", reason="install OpenRLHF without its GPU dependencies: "
                                           "pip install --no-deps openrlhf")
    from openrlhf.datasets import PromptDataset
    from openrlhf.datasets.utils import blending_datasets

    args = SimpleNamespace(use_ms=False, data=SimpleNamespace(input_key=input_key, label_key=label_key,
                                                              apply_chat_template=True, image_key="images"))
    strategy = Strategy(args)
    data = blending_datasets(str(path), None, strategy, 42, max_count=10**8, dataset_split="train")
    return PromptDataset(data, tokenizer, strategy)


def test_openrlhfs_prompt_dataset_shows_the_policy_its_tools(exported, tokenizer, capsys):
    """OpenRLHF renders ``input`` with the chat template and no ``tools=``: the prompt it builds from
    openrlhf.jsonl is byte-identical to the Qwen2.5 rendering of the first turn *with* the tools,
    and its label is the example PROVE's agent plays."""
    dataset = openrlhf_prompts(exported.dir / "openrlhf.jsonl", tokenizer)
    assert len(dataset) == len(exported.records)
    with_tools = without = 0
    for i, (row, record) in enumerate(zip(exported.rows["rl.jsonl"], exported.records, strict=True)):
        _, prompt, label, _ = dataset[i]
        assert prompt == tokenizer.apply_chat_template(row["prompt"], tools=row["tools"], tokenize=False,
                                                       add_generation_prompt=True)
        assert all(json.dumps(t, ensure_ascii=False) in prompt for t in row["tools"])
        assert json.loads(label) == {"example": record}
        with_tools += len(prompt)
        without += len(tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True))
    with capsys.disabled():
        print(f"\nOpenRLHF prompts: {with_tools / len(dataset):.0f} characters with the tools, "
              f"{without / len(dataset):.0f} without (mean of {len(dataset)})")
    # the same holds for Qwen3's templates; a Llama 3.1 model reads the same tool block in its system turn
    from trl.chat_template_utils import llama3_1_chat_template, qwen3_chat_template, qwen3_instruct_2507_chat_template

    for template in (qwen3_chat_template, qwen3_instruct_2507_chat_template):
        for row, prompt in zip(exported.rows["rl.jsonl"], exported.rows["openrlhf.jsonl"], strict=True):
            assert tokenizer.apply_chat_template(prompt["input"], tokenize=False, chat_template=template,
                                                 add_generation_prompt=True) \
                == tokenizer.apply_chat_template(row["prompt"], tools=row["tools"], tokenize=False,
                                                 chat_template=template, add_generation_prompt=True)

    llama = tokenizer.apply_chat_template(exported.rows["openrlhf.jsonl"][0]["input"], tokenize=False,
                                          chat_template=llama3_1_chat_template, add_generation_prompt=True)
    assert "<tools>" in llama and all(t["function"]["name"] in llama for t in exported.rows["rl.jsonl"][0]["tools"])
