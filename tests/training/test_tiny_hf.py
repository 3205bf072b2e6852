"""The tiny model kit and the local-model policy: a tokenizer trained on the corpus, a chat template
the Hermes parser reads, episode recording that tells the model's tokens from the environment's,
and batched generation whose results do not depend on thread timing."""

import json

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra: pip install torch==2.13.0 && pip install -e '.[train]'")

from prove_core.env.runtime import Environments  # noqa: E402
from prove_core.model import Example, from_json, read_jsonl  # noqa: E402
from prove_core.plugin.manager import Plugins  # noqa: E402
from prove_core.reward.parsing import load_parser  # noqa: E402
from prove_core.reward.rollout import rollout  # noqa: E402
from prove_plugins.train.models.hf import EpisodeRecorder, Generator, HFPolicy, Sampling, play_batch  # noqa: E402
from prove_plugins.train.models.template import chat_template, openai_messages  # noqa: E402
from prove_plugins.train.models.tiny import build_tiny_model, corpus_texts, train_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    from prove_core.config import load_experiment
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("kit")
    plugins = Plugins().load(autoload=False)
    exp = load_experiment({"name": "k", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 12, "plots": False, "exports": [], "cache_dir": str(tmp / "c")}})
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    examples = [from_json(r, Example) for r in read_jsonl(tmp / "k" / "synth" / "corpus.jsonl")]
    template = chat_template(max_tool_chars=200)
    tokenizer = train_tokenizer(corpus_texts(examples, template), vocab_size=600, template=template)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, seed=0)
    return plugins, examples, tokenizer, model


def test_template_renders_tools_and_calls_that_the_hermes_parser_reads_back(kit):
    plugins, examples, tokenizer, _ = kit
    example = next(e for e in examples if e.task.expected == "call")
    text = tokenizer.apply_chat_template(openai_messages(example.messages), tools=example.tools, tokenize=False)
    assert "# Tools\n<tools>\n" in text and "find_customers(query)" in text
    first = next(m for m in example.messages if m.tool_calls)
    turn = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    parsed = load_parser(plugins.registry, "hermes").parse(turn)
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in first.tool_calls]
    # markup is one token each, and survives decoding
    ids = tokenizer("<tool_call></tool_call>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 2 and tokenizer.decode(ids) == "<tool_call></tool_call>"
    # only assistant turns are marked for the warm-up's loss
    out = tokenizer.apply_chat_template(openai_messages(example.messages), tools=example.tools,
                                        return_assistant_tokens_mask=True, return_dict=True)
    kept = tokenizer.decode([t for t, m in zip(out["input_ids"], out["assistant_masks"]) if m])
    assert "<tool_call>" in kept and "<tool_response>" not in kept and example.messages[1].content not in kept


def test_tool_results_are_cut_for_small_models():
    long = chat_template(max_tool_chars=None)
    short = chat_template(max_tool_chars=50)
    assert "message.content[:50]" in short and "message.content[:" not in long


class Scripted:
    """A stand-in generator: fixed token sequences, records the prompts it saw."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.prompts = tokenizer, list(texts), []
        self.eos_ids = {tokenizer.eos_token_id}

    def __call__(self, prompts):
        self.prompts.extend(prompts)
        out = []
        for _ in prompts:
            text = self.texts.pop(0) if self.texts else "Done."
            out.append(self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])
        return out


def test_recorder_keeps_exactly_what_the_model_saw_and_masks_the_environment(kit):
    plugins, examples, tokenizer, model = kit
    example = next(e for e in examples if e.task.expected == "call" and len(e.task.calls) >= 2)
    call = example.task.calls[0]
    text = "<tool_call>" + json.dumps({"name": call.tool, "arguments": call.arguments}) + "</tool_call>"
    fake = Scripted(tokenizer, [text])
    recorder = EpisodeRecorder(HFPolicy(model, tokenizer, registry=plugins.registry, generate=fake))
    played = rollout(recorder, example, Environments(plugins.registry)(example.task))
    assert played.rollout.calls[0].name == call.tool
    full = recorder.prompt_ids + recorder.completion_ids
    # every generation saw exactly the recorded tokens before it
    for prompt in fake.prompts:
        assert full[: len(prompt)] == prompt
    generated = tokenizer.decode([t for t, m in zip(recorder.completion_ids, recorder.env_mask) if m])
    environment = tokenizer.decode([t for t, m in zip(recorder.completion_ids, recorder.env_mask) if not m])
    assert text in generated and "<tool_response>" not in generated
    assert "<tool_response>" in environment and "<|im_start|>user" in environment
    # the recorded episode is the chat template's rendering of the transcript (prefix-preserving)
    rendered = tokenizer.apply_chat_template(played.messages, tools=example.tools, tokenize=False)
    assert tokenizer.decode(full).startswith(rendered.rsplit("<|im_start|>assistant\n", 1)[0][:200])


def test_batched_generation_is_deterministic_and_matches_the_episode_order(kit):
    plugins, examples, tokenizer, model = kit
    policy = HFPolicy(model, tokenizer, registry=plugins.registry,
                      sampling=Sampling(max_new_tokens=12, temperature=1.0))
    environments = Environments(plugins.registry)
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        episodes = play_batch(policy, examples[:6], environments, max_batch=4)
        runs.append([e.recorder.completion_ids for e in episodes])
        assert [e.played.rollout.id for e in episodes] == [e.id for e in examples[:6]]
    assert runs[0] == runs[1]
    assert isinstance(policy.generate, Generator) and policy.generate.calls > 0


def test_greedy_policy_returns_a_parsed_turn(kit):
    plugins, examples, tokenizer, model = kit
    policy = HFPolicy(model, tokenizer, registry=plugins.registry, sampling=Sampling(max_new_tokens=8, temperature=0))
    example = examples[0]
    turn = policy.respond([m.to_openai() for m in example.messages[:2]], example.tools)
    assert turn.raw and isinstance(turn.attempts, tuple)
    again = policy.respond([m.to_openai() for m in example.messages[:2]], example.tools)
    assert again.raw == turn.raw


def test_the_sft_warm_up_keeps_a_marked_mistake_out_of_the_loss(kit):
    import attrs

    from prove_core.model import Message, ToolCall
    from prove_plugins.train.local import _encode

    _, examples, tokenizer, _ = kit
    example = next(e for e in examples if e.task.expected == "call")
    wrong = ToolCall(id="m1", name="get_balance", arguments={"account_id": "WRONGVALUE"})
    messages = [*example.messages[:2],
                Message(role="assistant", tool_calls=[wrong], mistake=True),
                Message(role="tool", tool_call_id="m1", name="get_balance", content='{"code": "INVALID_ARGUMENT"}'),
                Message(role="assistant", content="Sorry, retrying with the right value."),
                *example.messages[2:]]
    marked = attrs.evolve(example, messages=messages)
    ids, mask = _encode(tokenizer, marked, 100_000)
    trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    context = tokenizer.decode(ids)
    assert "WRONGVALUE" in context and "WRONGVALUE" not in trained  # context, never a target
    assert "retrying" in trained.replace(" ", "")  # the recovery after it is trained
    unmarked = attrs.evolve(example, messages=[m if not m.mistake else attrs.evolve(m, mistake=False) for m in messages])
    ids2, mask2 = _encode(tokenizer, unmarked, 100_000)
    assert "WRONGVALUE" in tokenizer.decode([t for t, m in zip(ids2, mask2) if m])  # the check can fail
