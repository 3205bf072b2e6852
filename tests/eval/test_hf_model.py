"""A tiny local Hugging Face model evaluated end to end on CPU: a tokenizer trained on the corpus,
random weights from a config, saved as a checkpoint folder and loaded by the ``hf`` client. Its
context length comes from the model's config; a prompt that does not fit fails its task loudly
(``RequestFailed``, recorded) instead of a silent "no call"; on BFCL it samples with BFCL's
settings unless its options say otherwise, and plays BFCL's prompting protocol."""

import pytest

from prove_core.eval.core import ALL, outcomes_of, run_evaluation
from prove_core.model import Example, from_json, read_jsonl
from tests.eval.conftest import eval_experiment

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus):
    from prove_plugins.train.models.tiny import build_tiny_model, corpus_texts, train_tokenizer

    examples = [from_json(r, Example) for r in read_jsonl(corpus)]
    tokenizer = train_tokenizer(corpus_texts(examples), vocab_size=512)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2)
    path = tmp_path_factory.mktemp("tiny-checkpoint")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_a_tiny_checkpoint_is_evaluated_end_to_end(tmp_path, corpus, plugins, checkpoint):
    hf = {"name": "tiny", "client": "hf", "options": {"path": str(checkpoint), "max_new_tokens": 12}}
    experiment = eval_experiment(
        tmp_path, models=[hf, {"name": "oracle", "client": "oracle"}],
        benchmarks=[{"name": "prove", "options": {"corpus": str(corpus), "heldout": 0.5, "limit": 2,
                                                   "max_assistant_turns": 10}}])
    report = run_evaluation(experiment, plugins, echo=lambda _: None)
    cells = report["benchmarks"]["prove"]["results"][ALL]
    assert cells["tiny"]["n"] == cells["oracle"]["n"] > 0 and cells["oracle"]["rate"] == 1.0
    outcomes = outcomes_of(tmp_path / "e" / "eval", "tiny", "prove")
    generated = [m for o in outcomes for m in o["details"]["messages"] if m["role"] == "assistant"]
    assert generated and all("reward" in o["metrics"] for o in outcomes)
    assert (tmp_path / "e" / "eval" / "prove.png").is_file()


@pytest.fixture(scope="module")
def bfcl_checkpoint(tmp_path_factory, corpus, bfcl):
    """A tiny checkpoint whose tokenizer also learned BFCL's function docs (BFCL prompts of 5-9k
    tokens) and whose context holds them (16,384 positions)."""
    import json

    from prove_plugins.train.models.tiny import build_tiny_model, corpus_texts, train_tokenizer

    examples = [from_json(r, Example) for r in read_jsonl(corpus)]
    docs = [json.dumps(list(bfcl.function_docs(c)), indent=4) for c in bfcl.SERVERS.values()]
    tokenizer = train_tokenizer([*corpus_texts(examples), *docs], vocab_size=2048, model_max_length=16384)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, max_positions=16384)
    path = tmp_path_factory.mktemp("tiny-bfcl-checkpoint")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_hf_context_comes_from_the_model_and_settings_follow_bfcl_unless_set(plugins, checkpoint, bfcl):
    from prove_core.config import ModelConfig
    from prove_core.errors import ProveError, RequestFailed
    from prove_core.eval.core import build_client
    from prove_plugins.eval.bfcl import request_defaults
    from prove_plugins.train.models.clients import RequestDefaults, configured

    def client(**options):
        return build_client(ModelConfig(name="m", client="hf", options={"path": str(checkpoint), **options}),
                            plugins.registry)

    plain = client()
    assert plain.context == 8192 == plain.local.sampling.max_context  # the config's max_position_embeddings
    assert (plain.local.sampling.temperature, plain.local.sampling.max_new_tokens) == (0.0, 256)
    on_bfcl = configured(plain, request_defaults("prompting"))
    sampling = on_bfcl.local.sampling
    assert (sampling.temperature, sampling.fit_cap, on_bfcl.local.text_only) == (0.001, 4096, True)
    assert on_bfcl.local.budget(8192 - 100) == 98 and on_bfcl.local.budget(10) == 4096  # min(4096, room - 2)
    with pytest.raises(RequestFailed, match="does not fit"):
        on_bfcl.local.budget(8190)  # BFCL asks a server for what it cannot give: an error
    assert plain.local.budget(8191) == 1
    assert configured(plain, RequestDefaults(seed=7)).local.sampling.seed == 7
    assert plain.local.sampling.fit_cap is None and not plain.local.text_only  # the original is untouched
    mine = configured(client(temperature=0.0, max_new_tokens=8, max_context=1024), request_defaults("fc"))
    assert (mine.local.sampling.temperature, mine.local.sampling.fit_cap, mine.local.budget(1020)) == (0.0, None, 4)
    with pytest.raises(ProveError, match="more than the model's own context length"):
        client(max_context=100000)


def test_a_prompt_that_does_not_fit_fails_its_entry_loudly_and_bfcl_prompting_plays_end_to_end(
        tmp_path, plugins, bfcl_checkpoint, bfcl):
    models = [{"name": "tiny", "client": "hf", "options": {"path": str(bfcl_checkpoint), "max_new_tokens": 6}},
              {"name": "small", "client": "hf", "options": {"path": str(bfcl_checkpoint), "max_context": 2048}}]
    benchmarks = [{"name": "bfcl", "label": "bfcl-prompting",
                   "options": {"categories": ["base"], "ids": ["multi_turn_base_0", "multi_turn_base_1"],
                               "protocol": "prompting"}}]
    experiment = eval_experiment(tmp_path, models=models, benchmarks=benchmarks, plots=False)
    run_evaluation(experiment, plugins, echo=lambda _: None)
    played = outcomes_of(tmp_path / "e" / "eval", "tiny", "bfcl-prompting")
    assert [o["task_id"] for o in played] == ["multi_turn_base_0", "multi_turn_base_1"]
    for outcome in played:  # random weights: text that decodes to no call, read with BFCL's decoder
        details = outcome["details"]
        assert details["protocol"] == "prompting" and "request_failed" not in details
        system, *rest = details["messages"]
        assert system["role"] == "system" and system["content"].startswith("You are an expert in composing functions.")
        replies = [m["content"] for m in rest if m["role"] == "assistant"]
        assert len(replies) == len(details["decoded"]) and not any(details["decoded"])  # one reply per turn, no call
    refused = outcomes_of(tmp_path / "e" / "eval", "small", "bfcl-prompting")
    assert len(refused) == 2  # the run went on after the first refusal
    for outcome in refused:
        assert not outcome["success"] and outcome["details"]["error_type"] == "multi_turn:inference_error"
        assert "does not fit" in outcome["details"]["error_message"] and "2048" in outcome["details"]["error_message"]


def test_hf_client_options_are_checked(plugins, tmp_path):
    from prove_core.config import ModelConfig
    from prove_core.errors import ConfigError, ProveError
    from prove_core.eval.core import build_client

    with pytest.raises(ConfigError, match=r"\$\.eval\.models\[0\]\.options"):
        build_client(ModelConfig(name="m", client="hf", options={"max_new_tokens": 8}), plugins.registry)
    with pytest.raises(ProveError, match="not a folder"):
        build_client(ModelConfig(name="m", client="hf", options={"path": str(tmp_path / "nope")}), plugins.registry)
