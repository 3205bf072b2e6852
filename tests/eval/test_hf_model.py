"""A tiny local Hugging Face model evaluated end to end on CPU: a tokenizer trained on the corpus,
random weights from a config, saved as a checkpoint folder and loaded by the ``hf`` client."""

import pytest

from prove_core.eval.core import ALL, outcomes_of, run_evaluation
from prove_core.model import Example, from_json, read_jsonl
from tests.eval.conftest import eval_experiment

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus):
    from prove_plugins.models.tiny import build_tiny_model, corpus_texts, train_tokenizer

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


def test_hf_client_options_are_checked(plugins, tmp_path):
    from prove_core.config import ModelConfig
    from prove_core.errors import ConfigError, ProveError
    from prove_core.eval.core import build_client

    with pytest.raises(ConfigError, match=r"\$\.eval\.models\[0\]\.options"):
        build_client(ModelConfig(name="m", client="hf", options={"max_new_tokens": 8}), plugins.registry)
    with pytest.raises(ProveError, match="not a folder"):
        build_client(ModelConfig(name="m", client="hf", options={"path": str(tmp_path / "nope")}), plugins.registry)
