"""Shared fixtures: a clean environment, one real encoder per test session, and a CLI runner."""
import os

import pytest
from click.testing import CliRunner

import config
from funes.selection.factory import RouterFactory
from funes.tools.loaders import load_packs

SHARED_EVAL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "eval")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Settings come from each test, never from the developer's shell."""
    for name in list(os.environ):
        if name.startswith(config.ENV_PREFIX):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("funes-data"))


@pytest.fixture(scope="session")
def settings(data_dir):
    return config.load({"DATA_DIR": data_dir})


@pytest.fixture(scope="session")
def factory(settings):
    """The real MiniLM encoder (ONNX, int8) and no-tool anchors, loaded once."""
    return RouterFactory(settings)


@pytest.fixture(scope="session")
def router(factory, settings):
    """A router over the five built-in packs."""
    return factory.router(load_packs(settings["PACKS"]))


@pytest.fixture
def runner(data_dir, monkeypatch):
    monkeypatch.setenv("FUNES_DATA_DIR", data_dir)
    return CliRunner()
