import pytest

from prove_core.config import SynthConfig, load_experiment
from prove_core.plugin.manager import Plugins
from prove_core.synth.pipeline import synthesize


@pytest.fixture(scope="session")
def plugins():
    return Plugins().load(autoload=False)


def experiment(tmp_path, **synth):
    synth.setdefault("cache_dir", str(tmp_path / "cache"))
    synth.setdefault("plots", False)
    return load_experiment({
        "name": "t", "output_dir": str(tmp_path), "stages": ["synth"],
        "servers": [{"name": "banking"}, {"name": "shopping"}],
        "synth": synth,
    })


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, plugins):
    """One small corpus over both bundled servers, shared by the read-only tests."""
    tmp = tmp_path_factory.mktemp("corpus")
    exp = experiment(tmp, examples=80, abstention_rate=0.1, plots=True)
    report = synthesize(exp, plugins, echo=lambda _: None, progress=False)
    return {"dir": tmp / "t" / "synth", "report": report, "experiment": exp}


__all__ = ["SynthConfig", "experiment"]
