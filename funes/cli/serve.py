"""Service commands: serve, decisions, memory, bench-chat."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

import click

import config as settings_module
from funes.cli import _need_file, _parts, _settings, cli, cli_errors


@cli.command("bench-chat")
@click.option("--cases", "cases_file", required=True, type=click.Path(), help="Cases file (e.g. seed_dev.jsonl).")
@click.option("-n", "n", default=10, show_default=True, help="Messages taken, spread over the file.")
@click.option("--out", "out_file", type=click.Path(), help="Also write the full JSON report here.")
@click.option("--modes", default="routed,all_tools", show_default=True,
              help="routed (Funes' tools), all_tools (every tool in every prompt), or both.")
@click.pass_context
@cli_errors
def bench_chat(ctx: click.Context, cases_file: str, n: int, out_file: str | None, modes: str) -> None:
    """/chat end to end with the configured LLM: Funes-routed tools versus all tools in every prompt."""
    _need_file(cases_file, "cases")
    import tempfile

    from tqdm import tqdm

    from funes import create_app
    from funes.cli.data import load_samples
    from funes.eval.bench import chat_turns, pick_cases
    from funes.eval.scoring import load_cases

    parts = _parts(ctx)
    cfg = parts.settings
    cases = pick_cases(load_cases(cases_file), n)
    llm, tmp = parts.llm, tempfile.mkdtemp(prefix="funes-bench-")
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    if not chosen or set(chosen) - {"routed", "all_tools"}:
        raise click.ClickException("--modes takes routed, all_tools or both, comma-separated")
    # each mode its own database, with the packs' sample data, so tools answer from data as they do under serve
    apps = {mode: create_app({"DATABASE_URL": f"sqlite:///{tmp}/{mode}.db", "OFFER_ALL_TOOLS": mode == "all_tools"},
                             llm=llm) for mode in chosen}
    for app in apps.values():
        load_samples(app.extensions["funes"].tool_context)
    report = chat_turns(apps, cases, progress=lambda it: tqdm(it, desc="chat", file=sys.stderr))
    report["settings"] = {k: cfg[k] for k in ("LLM_BACKEND", "LLM_THREADS", "LLM_OPTIONS")}
    if out_file:
        with open(out_file, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
    for mode, s in report["summary"].items():
        failing = ", ".join(f"{k} {v}" for k, v in sorted(s["failing"].items())) or "none"
        click.echo(f"{mode:<10} right and useful {s['right']}/{s['n']} ({s['core_right']}/{s['n']} on the six core "
                   f"checks; failing: {failing}) (expected tools {s['tools_right']}, raw replies "
                   f"{s['raw_replies']}, bare refusals {s['bare_refusals']}, repeated calls {s['repeated_calls']}); "
                   f"median {s['median_seconds']:.1f} s/turn, first byte {s['median_first_byte']:.3f} s, decision "
                   f"event {s['median_decision_event']:.3f} s, first words {s['median_first_words'] or 0:.1f} s; "
                   f"median prompt tokens {s['median_prompt_tokens']:.0f}")


@cli.command()
@click.pass_context
@cli_errors
def prepare(ctx: click.Context) -> None:
    """Do the first run's one-off work: the database schema, the encoder's ONNX export, the sample data."""
    from funes.cli.data import sample_line, sample_reports

    parts = _parts(ctx)
    with _step("database schema"):
        parts.db  # noqa: B018  (made here once rather than by workers racing to make it)
    names = _encoder_names(parts.settings)
    what = "encoders" if len(names) > 1 else "encoder"
    first = parts.settings["EMBED_BACKEND"] == "onnx" and not _exported(parts.settings["DATA_DIR"], names)
    with _step(f"exporting the {what} to ONNX (once)" if first else f"loading the {what}"):
        parts.encoder  # noqa: B018  (routing; tool data and memories use MiniLM, below)
        tool_context = parts.tool_context
    _check_tools(parts.settings)
    if not parts.settings["SAMPLE_DATA"]:
        return
    lines = [sample_line(pack, report) for pack, report in sample_reports(tool_context)]
    for line in lines or ["sample data: every pack already has data"]:
        click.echo(line, err=True)


def _check_tools(settings: dict) -> None:
    """Load the tools as each worker will, so a broken module or servers file is one line here, not a traceback in
    each worker; the MCP servers are read, not started: this process serves nothing, and each worker starts them."""
    from funes.mcp.config import load_servers
    from funes.tools.sources import configured

    if settings["MCP_SERVERS"]:
        load_servers(settings["MCP_SERVERS"])
    configured(settings, check_requires=not settings["MCP_SERVERS"])  # a required tool may be a server's


@contextlib.contextmanager
def _step(what: str):
    """Say what is being done, then that it is done and how long it took (two lines: a library may warn between)."""
    click.echo(f"{what}…", err=True)
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        click.echo(f"{what}: failed", err=True)
        raise
    click.echo(f"{what}: done in {time.perf_counter() - started:.1f} s", err=True)


def _encoder_names(settings: dict) -> set[str]:
    """The routing encoder and MiniLM (tool data, memories): one model where EMBED_MODEL is `minilm`."""
    from funes.selection.encoder import minilm_path, model_name, model_path_for

    return {model_name(model_path_for(settings["EMBED_MODEL"], settings["DATA_DIR"])), model_name(minilm_path())}


def _exported(data_dir: str, names: set[str]) -> bool:
    """Whether DATA_DIR already holds an ONNX export of each encoder (Encoder exports one there on first load)."""
    return all(any((Path(data_dir) / "models" / name).glob("onnx/*.onnx")) for name in names)


def _prepare(config_file: str | None) -> None:
    """`funes prepare` in its own process: gunicorn forks its workers from this one, and a fork of a process
    whose thread pools (OpenMP, onnxruntime, tokenizers) have started deadlocks in the child."""
    import subprocess

    # -P: a config.py or mcp.py in the caller's directory must not stand in for Funes' own (funes/__main__.py
    # puts that directory last), so the checkout is named on PYTHONPATH instead
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-P", "-m", "funes", *(["--config", config_file] if config_file else []), "prepare"]
    if subprocess.run(command, env=env).returncode != 0:
        raise click.ClickException("first-run setup (`python -m funes prepare`) failed; see its message above")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="gunicorn worker processes (each loads the encoder; with the embedded LLM, each its own model).")
@click.option("--threads", default=4, show_default=True, type=click.IntRange(min=1),
              help="Threads per worker; all but one may run /chat turns (MAX_CONCURRENT_TURNS).")
@click.option("--insecure", is_flag=True, help="Allow a --host other than loopback although no API key is in force.")
@click.pass_context
@cli_errors
def serve(ctx: click.Context, host: str, port: int, workers: int, threads: int, insecure: bool) -> None:
    """Run the chat service under gunicorn (after `prepare`, so a fresh machine gets its sample data)."""
    import atexit
    import tempfile

    from funes.web.server import run

    # a bad setting or a missing tools file is one line here, before `prepare` and the workers would each trip on it
    settings = _settings(ctx)
    if not insecure and not _loopback(host) and not _keys_in_force(settings):
        raise click.ClickException(
            f"--host {host} would let anyone who reaches this port read every user's memories and decisions: "
            "no API key is in force. Add one (`funes keys add --user NAME`, or FUNES_API_KEYS), bind 127.0.0.1, "
            "or pass --insecure.")
    _port_free(host, port)  # else /readyz would be answered by whatever listens there, and "ready" printed
    if not settings["MAX_CONCURRENT_TURNS"]:  # auto: every thread but one may run a turn; workers read it at start
        os.environ[settings_module.ENV_PREFIX + "MAX_CONCURRENT_TURNS"] = str(max(1, threads - 1))
    config_file = ctx.obj.get("config_file")
    _prepare(config_file)
    if config_file:
        os.environ[settings_module.ENV_PREFIX + "CONFIG_FILE"] = config_file
    # Workers count into files here, so /metrics from any worker shows them all (set before any worker
    # imports prometheus_client); a fresh directory per run: counters start at zero like the process.
    metrics_dir = tempfile.mkdtemp(prefix="funes-metrics-")
    atexit.register(_remove_in_master, os.getpid(), metrics_dir)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    # a service says what it does (a line per decision, enrichment's progress) without -v; workers inherit it
    logging.getLogger("funes").setLevel(min(logging.getLogger("funes").getEffectiveLevel(), logging.INFO))
    _announce_ready(host, port)
    run(host, port, workers, threads)


def _remove_in_master(master: int, folder: str) -> None:
    """Remove the metrics folder when gunicorn's master exits, not when a worker does.

    Workers are forked with this handler registered: a worker leaving through Python (a tool's sys.exit, a TERM,
    a HUP's replacement) removed the folder, its successor could not boot, and gunicorn's master gave up."""
    if os.getpid() == master:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _port_free(host: str, port: int) -> None:
    """A ClickException when HOST:PORT cannot be listened on (another server holds it), before any work starts."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds: only a listener refuses
        try:
            sock.bind((host, port))
        except OSError as e:
            raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e}; another server may be "
                                       "running there (stop it, or pass another --port)") from None


def _announce_ready(host: str, port: int, interval: float = 1.0) -> threading.Thread:
    """Print one `ready at http://HOST:PORT` line when /readyz first answers 200 (encoder loaded, LLM warmed).

    A daemon thread of gunicorn's master: it must hold no lock a forked worker could inherit, so it imports
    nothing once started. Its first connection imported encodings.idna (for the host name), and a worker forked
    meanwhile waited forever on that module's lock (seen at a newcomer's start: /readyz never answered)."""
    import encodings.idna  # noqa: F401
    import http.client

    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # a wildcard bind: ask locally

    def poll() -> None:
        while True:
            connection = http.client.HTTPConnection(probe, port, timeout=interval * 5)
            try:
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    shown = f"[{host}]" if ":" in host else host
                    click.echo(f"ready at http://{shown}:{port}")
                    sys.stdout.flush()
                    return
            except OSError:  # not listening yet, or a worker still loading
                pass
            finally:
                connection.close()
            time.sleep(interval)

    thread = threading.Thread(target=poll, name="funes-ready", daemon=True)
    thread.start()
    return thread


def _keys_in_force(settings: dict) -> bool:
    """Whether any API key is in force. Only the database is opened here, and closed: gunicorn forks this process."""
    from funes.store.db import Database, database_url
    from funes.store.keys import KeyStore, configured_keys

    db = Database(database_url(settings))
    try:
        return KeyStore(db, configured_keys(settings["API_KEYS"])).any()
    finally:
        db.engine.dispose()


def _loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only."""
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost may resolve anywhere
        return False


@cli.group(invoke_without_command=True)
@click.option("-n", "limit", default=20, show_default=True, type=click.IntRange(1, 500), help="How many, newest first.")
@click.option("--path", help="Only this path: tools, memory, route, proxy or mcp.")  # DecisionLog.query refuses others
@click.option("--tool", help="Only decisions that selected this tool.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON lines.")
@click.pass_context
@cli_errors
def decisions(ctx: click.Context, limit: int, path: str | None, tool: str | None, as_json: bool) -> None:
    """Show recent routing decisions from the decision log (or label one: `decisions label ID TOOL...`)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = _parts(ctx).log.query(limit=limit, path=path, tool=tool)
    for r in rows:
        if as_json:
            click.echo(json.dumps(r, ensure_ascii=False))
            continue
        tools = ",".join(r["selected"]) or "-"
        ms = r["timings"].get("turn") or r["timings"].get("total") or 0.0
        click.echo(f"{r['id']:>6}  {r['created_at'][:19]}  {r['path']:<6} {r['decided_by']:<9} {tools:<40} "
                   f"{r['outcome']:<15} {ms:8.1f} ms  {r['message'][:60]!r}")


@decisions.command("label")
@click.argument("decision_id", type=int)
@click.argument("tools", nargs=-1)
@click.option("--by", "labelled_by", default="cli", show_default=True, help="Who labels (kept with the label).")
@click.pass_context
@cli_errors
def decisions_label(ctx: click.Context, decision_id: int, tools: tuple[str, ...], labelled_by: str) -> None:
    """Say which TOOLS decision DECISION_ID should have selected (none given: no tool)."""
    parts = _parts(ctx)
    label = parts.label(decision_id, list(tools), labelled_by)
    click.echo(f"decision {decision_id} labelled {', '.join(label['tools']) or 'no tool'} (label {label['id']})")


def _memory(ctx: click.Context):
    parts = _parts(ctx)
    return parts.settings, parts.memory


@cli.group()
def memory() -> None:
    """Long-term memory: ingest documents, search what a user's memory holds."""


@memory.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--user", "user_id", required=True, help="Whose memory (the user_id sent to /chat).")
@click.pass_context
@cli_errors
def memory_add(ctx: click.Context, files: tuple[str, ...], user_id: str) -> None:
    """Chunk text/Markdown FILES and store them as the user's memories."""
    from memory.chunking import chunk_text, read_document

    cfg, store = _memory(ctx)
    for path in files:
        chunks = chunk_text(read_document(path), max_chars=cfg["MEMORY_CHUNK_CHARS"])
        store.add_many(user_id, chunks, kind="document", source=path)
        click.echo(f"{path}: {len(chunks)} chunks stored for {user_id}")


@memory.command("search")
@click.argument("text")
@click.option("--user", "user_id", required=True, help="Whose memory (the user_id sent to /chat).")
@click.option("-k", "top_k", type=int, help="How many (default: MEMORY_TOP_K).")
@click.pass_context
@cli_errors
def memory_search(ctx: click.Context, text: str, user_id: str, top_k: int | None) -> None:
    """Print the user's memories closest to TEXT, with their scores."""
    _, store = _memory(ctx)
    hits = store.search(user_id, text, top_k=top_k)
    for h in hits:
        click.echo(f"{h.score:.3f}  [{h.kind}] {h.text[:200]!r}  ({h.source or '-'})")
    if not hits:
        click.echo("no memory scored above MEMORY_MIN_SCORE")


