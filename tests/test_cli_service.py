"""Service-side commands: memory add/search and the decisions log."""
import json

from funes.cli import cli


def test_memory_add_then_search(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/m.db")
    doc = tmp_path / "notes.md"
    doc.write_text("# Pets\n\nMy cat Miso is afraid of the vacuum cleaner.\n\n# Work\n\nStand-up is at 9:30 on weekdays.\n")
    result = runner.invoke(cli, ["memory", "add", str(doc), "--user", "ana"])
    assert result.exit_code == 0, result.output
    assert "chunks stored for ana" in result.output
    found = runner.invoke(cli, ["memory", "search", "what scares my cat?", "--user", "ana"])
    assert found.exit_code == 0 and "Miso" in found.output.splitlines()[0]
    other = runner.invoke(cli, ["memory", "search", "what scares my cat?", "--user", "ben"])
    assert "Miso" not in other.output and "no memory" in other.output


def test_memory_add_reports_bad_files(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/m.db")
    result = runner.invoke(cli, ["memory", "add", str(tmp_path / "missing.md"), "--user", "ana"])
    assert result.exit_code == 1 and "Traceback" not in result.output and "missing.md" in result.output
    folder = runner.invoke(cli, ["memory", "add", str(tmp_path), "--user", "ana"])
    assert folder.exit_code == 1 and f"{tmp_path} is a folder" in folder.output


def test_decisions_lists_what_was_routed(runner, tmp_path, monkeypatch, factory, data_dir):
    from funes.store.db import Database
    from funes.store.decisions import DecisionLog

    url = f"sqlite:///{tmp_path}/d.db"
    monkeypatch.setenv("FUNES_DATABASE_URL", url)
    from funes.tools.loaders import load_packs

    router = factory.router(load_packs(["assistant"]))
    log = DecisionLog(Database(url))
    for text in ("weather in Rome tomorrow", "tell me a joke"):
        log.record(router.select(text), endpoint="route", path="route")
    result = runner.invoke(cli, ["decisions", "-n", "5"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 2 and "tell me a joke" in lines[0] and "get_weather" in lines[1]
    only = runner.invoke(cli, ["decisions", "--tool", "get_weather", "--json"])
    rows = [json.loads(line) for line in only.output.strip().splitlines()]
    assert [r["selected"] for r in rows] == [["get_weather"]]
    log.record(router.select("weather in Oslo"), endpoint="mcp", path="mcp")  # find_tools' decisions
    mcp = runner.invoke(cli, ["decisions", "--path", "mcp"])
    assert mcp.exit_code == 0 and len(mcp.output.strip().splitlines()) == 1 and "weather in Oslo" in mcp.output
    wrong = runner.invoke(cli, ["decisions", "--path", "mpc"])
    assert wrong.exit_code == 1 and "'path' must be one of tools, memory, route, proxy, mcp" in wrong.output
    assert runner.invoke(cli, ["decisions", "-n", "0"]).exit_code == 2  # as /decisions refuses it: 1 to 500


def test_serve_refuses_a_public_host_without_insecure(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/keys.db")
    result = runner.invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "1"])
    assert result.exit_code == 1 and "--host 0.0.0.0 would let anyone" in result.output
    assert "funes keys add" in result.output and "--insecure" in result.output and "Traceback" not in result.output


def test_serve_refuses_a_port_another_server_holds(runner, tmp_path, monkeypatch):
    import socket

    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/serve.db")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = runner.invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 1 and f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "another --port" in result.output and "ready at" not in result.output and "Traceback" not in result.output


def test_keys_add_list_and_revoke(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/keys.db")
    added = runner.invoke(cli, ["keys", "add", "--user", "ana", "--operator"])
    assert added.exit_code == 0, added.output
    key = added.stdout.strip()
    assert key.startswith("funes_") and len(key) > 30
    listed = runner.invoke(cli, ["keys", "list", "--json"])
    [row] = json.loads(listed.stdout)
    assert row["user_id"] == "ana" and row["operator"] and row["revoked_at"] is None and key.startswith(row["prefix"])
    assert key not in listed.stdout
    assert runner.invoke(cli, ["keys", "revoke", str(row["id"])]).exit_code == 0
    again = runner.invoke(cli, ["keys", "revoke", str(row["id"])])
    assert again.exit_code == 1 and f"no active key {row['id']}" in again.output
    bad = runner.invoke(cli, ["keys", "add", "--user", " "])
    assert bad.exit_code == 1 and "a key's user must be" in bad.output and "Traceback" not in bad.output


def test_the_ready_poller_imports_nothing_once_started():
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a port nobody listens on: the poller keeps trying
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = ("import sys, threading, time\nseen = []\n"  # every module the poller's thread imports
            "sys.addaudithook(lambda event, args: event == 'import' and threading.current_thread().name == "
            "'funes-ready' and seen.append(args[0]))\nfrom funes.cli.serve import _announce_ready\n"
            f"_announce_ready('127.0.0.1', {port}, interval=0.05)\ntime.sleep(0.5)\nprint(seen)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # a module imported there holds a lock gunicorn's fork can inherit
