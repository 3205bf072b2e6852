"""The one validation pass: a whole experiment is checked before any stage starts, every problem
reported at once with its path and a did-you-mean; `--set` overrides any setting."""

import json
import textwrap

import pytest

from prove_core.config import apply_overrides, load_experiment
from prove_core.errors import ConfigError
from prove_core.plugin.manager import get_plugins
from prove_core.stages import STAGES, check_experiment
from tests.core.test_cli import prove

TYPOS = """
name = "typos"
output_dir = "{out}"
stages = ["synth", "reward", "train", "evall"]
[[servers]]
name = "bankin"
options = {{ customerz = 3 }}
[synth]
exampels = 5
teacher = "programatic"
exports = ["sft", "hff"]
[synth.perturbations]
perturbations = [{{ name = "distractor" }}, {{ name = "enum_stripping", options = {{ bogus = 1 }} }}]
[reward]
components = [{{ name = "validity" }}, {{ name = "no_dob_echoo" }}]
parser = "hermse"
[train]
backend = "trl"
options = {{ baselin = 1 }}
[eval]
models = [{{ name = "o", client = "oracel" }}]
benchmarks = [{{ name = "prove", options = {{ limt = 3 }} }}]
"""


def write(tmp_path, text, name="exp.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def banking(tmp_path, name, extra=""):
    """An experiment file on the banking server, synthesizing two examples, plus ``extra``."""
    return write(tmp_path, textwrap.dedent(f"""
        name = "{name}"
        output_dir = "{tmp_path / 'runs'}"
        stages = ["synth"]
        [[servers]]
        name = "banking"
        [synth]
        examples = 2
        """) + textwrap.dedent(extra))


def test_a_config_with_typos_in_every_section_is_refused_whole_before_any_work(tmp_path):
    config = write(tmp_path, TYPOS.format(out=tmp_path / "runs"))
    proc = prove("run", str(config))
    assert proc.returncode == 1 and proc.stdout == ""
    # phase 1 (the shell) stops first: the unknown [synth] key, with its near miss
    assert "$.synth: extra fields found (exampels); did you mean 'examples'?" in proc.stderr
    config.write_text(config.read_text().replace("exampels", "examples"))
    proc = prove("run", str(config))
    assert proc.returncode == 1 and proc.stdout == ""
    expected = [
        "$.stages: unknown stage 'evall'; did you mean 'eval'?",
        "$.servers[0].name: no server named 'bankin'",
        "$.synth.teacher: no teacher named 'programatic'",
        "$.synth.perturbations.perturbations[0].name: no perturbation named 'distractor'",
        "$.synth.perturbations.perturbations[1].options: extra fields found (bogus)",
        "$.synth.exports[1]: unknown format 'hff'; did you mean 'hf'?",
        "$.reward.components[1].name: no reward named 'no_dob_echoo'",
        "$.reward.parser: no parser named 'hermse'",
        "$.train.options: extra fields found (baselin)",
        "$.eval.models[0].client: no client named 'oracel'",
        "$.eval.benchmarks[0].options: extra fields found (limt); did you mean 'limit'?",
    ]
    for line in expected:
        assert line in proc.stderr, (line, proc.stderr)
    assert "did you mean 'banking'?" in proc.stderr and "did you mean 'programmatic'?" in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing started


def test_each_stage_command_checks_the_whole_config_first(tmp_path):
    config = banking(tmp_path, "one", """
        [train]
        options = { baselin = 1 }
        """)
    for command in ("synth", "train", "run"):
        proc = prove(command, str(config))
        assert proc.returncode == 1 and "$.train.options: extra fields found (baselin)" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs" / "one" / "synth").exists()


def test_an_invalid_option_on_an_existing_run_folder_is_reported_as_itself_not_as_a_fingerprint(tmp_path):
    synth = tmp_path / "runs" / "old" / "synth"
    synth.mkdir(parents=True)
    (synth / "corpus.jsonl").write_text('{"id": "x"}\n')
    (synth / "fingerprint.json").write_text(json.dumps({"made": "elsewhere"}))
    config = banking(tmp_path, "old", """
        perturbations = { perturbations = [{ name = "distractors", options = { maxx = 3 } }] }
        """)
    proc = prove("synth", str(config))
    assert proc.returncode == 1
    assert "$.synth.perturbations.perturbations[0].options: extra fields found (maxx)" in proc.stderr
    assert "--fresh" not in proc.stderr and "other settings" not in proc.stderr
    # the library call as well: options are built before the fingerprint is compared
    from prove_core.synth.pipeline import synthesize

    with pytest.raises(ConfigError, match=r"extra fields found \(maxx\)"):
        synthesize(load_experiment(config), get_plugins(), echo=lambda _: None)


def test_paths_the_running_stages_need_are_checked_before_they_start(tmp_path):
    experiment = load_experiment({
        "name": "p", "output_dir": str(tmp_path), "stages": ["reward", "train"],
        "servers": [{"name": "banking"}],
        "reward": {"input": str(tmp_path / "missing.jsonl")},
        "train": {"corpus": str(tmp_path / "nope.jsonl"), "model": {"path": str(tmp_path / "no-model")}},
        "synth": {"imports": [{"format": "when2call", "path": str(tmp_path / "w2c.jsonl")}]},
    })
    with pytest.raises(ConfigError) as err:
        check_experiment(experiment, get_plugins())
    text = str(err.value)
    for path in ("$.reward.input", "$.train.corpus", "$.train.model.path"):
        assert path in text
    assert "$.synth.imports" not in text  # synth does not run here: its input files are not needed yet
    with pytest.raises(ConfigError, match=r"\$\.synth\.imports\[0\]\.path"):
        check_experiment(experiment, get_plugins(), run=["synth"])


def test_a_valid_experiment_passes_and_the_train_corpus_may_come_from_an_earlier_stage(tmp_path):
    experiment = load_experiment({"output_dir": str(tmp_path), "stages": ["synth", "train"],
                                  "servers": [{"name": "banking"}], "train": {}})
    check_experiment(experiment, get_plugins())  # synth writes the corpus train reads
    with pytest.raises(ConfigError, match=r"\$\.train\.corpus: .*corpus\.jsonl does not exist"):
        check_experiment(experiment, get_plugins(), run=["train"])


def test_a_missing_optional_package_is_reported_with_a_working_install_line(tmp_path, monkeypatch):
    from importlib import metadata

    from prove_core.synth import exporters

    real = metadata.version

    def version(name):
        if name == "datasets":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    experiment = load_experiment({"output_dir": str(tmp_path), "stages": ["synth"], "servers": [{"name": "banking"}],
                                  "synth": {"exports": ["sft", "hf"]}})
    with pytest.raises(ConfigError) as err:
        check_experiment(experiment, get_plugins())
    assert "$.synth.exports[1]: the 'hf' export needs the datasets package: pip install 'datasets>=4.7'" in str(err.value)
    # the install line names the floor the code checks, which is the one the `train` extra declares
    module, floor, install = exporters.REQUIRES["hf"]
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert f"{module}>={floor}" in extras["project"]["optional-dependencies"]["train"] and f"{module}>={floor}" in install
    monkeypatch.setattr(metadata, "version", lambda name: "4.6.1" if name == "datasets" else real(name))
    assert exporters.export_problems(["hf"]) == [
        "$.synth.exports[0]: the 'hf' export needs datasets>=4.7 (found 4.6.1): pip install -U 'datasets>=4.7'"]
    assert exporters.export_problems(["hf"], check_packages=False) == []


def test_set_overrides_any_setting_by_its_dotted_path():
    data = {"servers": [{"name": "banking"}], "reward": {"components": [{"name": "validity"}]}}
    out = apply_overrides(data, ["synth.examples=50", "train.sft.steps=3", 'synth.exports=["sft", "hf"]',
                                 "reward.components[0].weight=0.25", "servers[0].options={ customers = 4 }",
                                 "name=plain text"])
    experiment = load_experiment(out)
    assert experiment.synth.examples == 50 and experiment.train.sft.steps == 3
    assert experiment.synth.exports == ["sft", "hf"] and experiment.reward.components[0].weight == 0.25
    assert experiment.servers[0].options == {"customers": 4} and experiment.name == "plain text"
    assert data == {"servers": [{"name": "banking"}], "reward": {"components": [{"name": "validity"}]}}  # unchanged


@pytest.mark.parametrize(("override", "fragment"), [
    ("synth.exampels=5", "$.synth: extra fields found (exampels); did you mean 'examples'?"),
    ("synth.examples=many", "$.synth.examples: expected int, got str"),
    ("servers[3].seed=1", "--set servers[3].seed=1: $.servers[3] is not an existing list item"),
    ("synth.examples", "--set synth.examples: expected KEY=VALUE"),
    ("synth..x=1", "is not a key"),
])
def test_a_bad_override_is_a_config_error_with_its_path(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_experiment({"servers": [{"name": "banking"}]}, [override])
    assert fragment in str(err.value)


def test_set_reaches_the_commands(tmp_path):
    config = banking(tmp_path, "set")
    proc = prove("run", str(config), "--set", "synth.exampels=3")
    assert proc.returncode == 1 and "did you mean 'examples'?" in proc.stderr
    proc = prove("train", str(config), "--set", "train.options.baselin=1")
    assert proc.returncode == 1 and "$.train.options: extra fields found (baselin)" in proc.stderr


def test_run_help_lists_every_stage():
    text = prove("run", "--help").stdout
    for stage in STAGES:
        assert f"\n    {stage} " in text, stage
    assert "--set KEY=VALUE" in text


def test_a_components_missing_packages_are_reported_before_its_stage_with_the_install_line(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("")
    experiment = load_experiment({"output_dir": str(tmp_path), "stages": ["train", "eval"], "servers": [{"name": "banking"}],
                                  "train": {"backend": "trl", "corpus": str(corpus)},
                                  "eval": {"models": [{"name": "m", "client": "hf", "options": {"path": "x"}}],
                                           "benchmarks": [{"name": "prove"}]}})
    with pytest.raises(ConfigError) as err:
        check_experiment(experiment, get_plugins())
    assert ("$.train.backend: trainer 'trl' needs trl: pip install torch==2.13.0 && pip install -e '.[train]'"
            in str(err.value))
    assert "$.eval.models[0].client" not in str(err.value)  # torch and transformers are here
    check_experiment(experiment, get_plugins(), run=["eval"])  # a stage that does not run needs nothing installed


def test_the_configuration_page_example_passes_the_validation_pass_and_a_wrong_tool_does_not():
    import re
    from pathlib import Path

    from prove_core.config import parse_toml

    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    data = parse_toml(re.search(r"```toml\n(.*?)```", text, re.S).group(1))
    check_experiment(load_experiment(data), get_plugins())
    data["episode"]["steps"][0]["tool"] = "banking_find_customers"  # the prefix exists only with several servers
    with pytest.raises(ConfigError, match=r"\$\.episode\.steps\[0\]\.tool: no tool 'banking_find_customers' on banking; "
                                          r"did you mean 'find_customers'\?"):
        check_experiment(load_experiment(data), get_plugins())
