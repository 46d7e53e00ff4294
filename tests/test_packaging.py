"""The package: `pip install .` into a fresh venv gives a `funes` that serves, and its pins match requirements.txt."""
import ast
import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from tests.test_first_start import _free_port, _wait_healthy, stop

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv", "instance", "__pycache__", "build", "*.egg-info",
                                     "bench-results", ".pytest_cache")


def pins(lines) -> set[str]:
    return {str(Requirement(line)) for line in lines if line.strip() and not line.lstrip().startswith("#")}


def test_the_package_declares_every_pin_of_requirements_txt_and_no_other():
    declared = pins(PYPROJECT["dependencies"])
    for extra in PYPROJECT["optional-dependencies"].values():
        declared |= pins(extra)
    assert declared == pins((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())


def runtime_closure() -> set[str]:
    """The distributions `pip install .` brings: the runtime pins and what they require, transitively."""
    seen, todo = set(), [Requirement(r) for r in PYPROJECT["dependencies"]]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(req.name) or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in req.extras or [""]):
                todo.append(sub)
    return seen


def imported_modules() -> set[str]:
    """Top-level names the code that ships (funes/, memory/, config.py) imports, standard library excluded."""
    files = [*ROOT.glob("funes/**/*.py"), *ROOT.glob("memory/**/*.py"), ROOT / "config.py"]
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"funes", "memory", "config", "__future__"}


def test_every_module_the_code_imports_comes_with_the_runtime_dependencies():
    provided = metadata.packages_distributions()
    closure = runtime_closure()
    missing = {module: provided.get(module) for module in imported_modules()
               if not {d.lower().replace("_", "-") for d in provided.get(module, [])} & closure}
    assert missing == {}, "imported, but not brought by pyproject's dependencies"


@pytest.fixture()
def fresh_install(tmp_path_factory):
    """A copy of the tree installed with `pip install .` into a new venv (~1 min from pip's cache); removed after."""
    where = tmp_path_factory.mktemp("install")
    source, venv = where / "funes-src", where / "venv"
    shutil.copytree(ROOT, source, ignore=NOT_SHIPPED)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(source)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    yield venv
    shutil.rmtree(where, ignore_errors=True)  # ~3 GB: not left for pytest's keep-three-runs rule


def test_pip_install_into_a_fresh_venv_gives_a_funes_that_serves_route(fresh_install, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUNES_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", PATH=f"{fresh_install / 'bin'}:{env['PATH']}")
    where = subprocess.run([str(fresh_install / "bin" / "python"), "-c", "import funes, config; print(funes.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert str(fresh_install) in where  # the installed copy, not this checkout
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    server = subprocess.Popen([str(fresh_install / "bin" / "funes"), "serve", "--port", str(port)], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", server)
        reply = httpx.post(f"http://127.0.0.1:{port}/route", json={"messages": "What's the weather in Oslo now?"},
                           timeout=60)
        assert reply.status_code == 200 and reply.json()["selected"] == ["get_weather"]
        assert (tmp_path / "instance" / "funes.db").exists()  # the default data dir, beside where it was started
    finally:
        stop(server, log)
