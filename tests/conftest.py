"""Shared fixtures: a clean environment, one real encoder per test session, databases, and a CLI runner."""
import os
import uuid

import pytest
import sqlalchemy
from click.testing import CliRunner

import config
from funes import create_app
from funes.selection.factory import RouterFactory, text_encoder_from_settings
from funes.tools.loaders import load_packs
from tests.ollama_wire import FakeOllama
from tests.proxy_wire import Upstream

SHARED_EVAL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "eval")
# The server scripts/test starts (scripts/postgres) where PostgreSQL is installed; read before clean_env runs.
POSTGRES_URL = os.environ.get("POSTGRES_TEST_URL")


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
def text_encoder(settings):
    """MiniLM, as the service embeds tool data and memories with it (the routing encoder is tuned for tools)."""
    return text_encoder_from_settings(settings)


@pytest.fixture(scope="session")
def router(factory, settings):
    """A router over the five built-in packs."""
    return factory.router(load_packs(settings["PACKS"]))


@pytest.fixture
def runner(data_dir, monkeypatch):
    monkeypatch.setenv("FUNES_DATA_DIR", data_dir)
    return CliRunner()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A new empty database: a SQLite file, then a fresh PostgreSQL database when a server is running."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/funes.db"
        return
    if not POSTGRES_URL:
        pytest.skip("no PostgreSQL server: scripts/test starts one where PostgreSQL is installed")
    name = f"funes_test_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield sqlalchemy.engine.make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture
def ollama():
    """A small real HTTP server speaking Ollama's /api/chat, with scripted replies."""
    server = FakeOllama()
    yield server
    server.close()


@pytest.fixture
def app(factory, data_dir, database_url, ollama):
    """The service over the five packs, on each database, its LLM the fake Ollama through the real client."""
    return create_app({"DATA_DIR": data_dir, "DATABASE_URL": database_url,
                       "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake"},
                      encoder=factory.encoder)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def upstream():
    """A small real HTTP server answering in Ollama's or OpenAI's wire format, streamed or whole."""
    server = Upstream()
    yield server
    server.close()


def pytest_sessionfinish(session, exitstatus):
    """Background threads of finished tests (enrichment) may still reach the databases those tests dropped:
    quiet their logs, so pytest's summary stays the last line of the run."""
    import logging

    logging.disable(logging.CRITICAL)
