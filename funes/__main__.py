"""The command line: python -m funes route | eval | calibrate | ..."""
from __future__ import annotations

import functools
import json
import logging
import os
import sys

import click

import config as settings_module
from funes.errors import FunesError


def cli_errors(func):
    """Turn Funes and config errors into one-line CLI messages, not tracebacks."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (FunesError, ValueError) as e:
            raise click.ClickException(str(e)) from None
    return wrapper


def _config(ctx: click.Context) -> dict:
    return settings_module.load(path=ctx.obj.get("config_file"))


def _factory(cfg: dict):
    from funes.selection.factory import RouterFactory

    return RouterFactory(cfg)


def _registry(cfg: dict, tools_file: str | None):
    from funes.tools.loaders import load_file, load_packs

    return load_file(tools_file) if tools_file else load_packs(cfg["PACKS"], cfg["TOOLS_FILES"])


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise click.ClickException(f"{path}: {what} file not found") from None
    except json.JSONDecodeError as e:
        raise click.ClickException(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


@click.group()
@click.option("--config", "config_file", type=click.Path(), help="JSON config file (e.g. written by calibrate).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """Funes: a local-first tool router for LLM assistants."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config_file": config_file}


@cli.command()
@click.argument("message")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file (JSON/JSONL); default: built-in packs.")
@click.option("--history", "history_file", type=click.Path(),
              help="JSON list of earlier {role, content} messages.")
@click.pass_context
@cli_errors
def route(ctx: click.Context, message: str, tools_file: str | None, history_file: str | None) -> None:
    """Print the routing Decision for MESSAGE as JSON."""
    cfg = _config(ctx)
    history = _read_json(history_file, "history") if history_file else []
    if not isinstance(history, list):
        raise click.ClickException(f"{history_file}: history must be a JSON list of messages")
    router = _factory(cfg).router(_registry(cfg, tools_file))
    decision = router.select(history + [{"role": "user", "content": message}])
    click.echo(json.dumps(decision.to_dict(), indent=2, ensure_ascii=False))


def _measure(ctx, cases_files, tools_file, examples_file=None, per_tool=50):
    from tqdm import tqdm

    from funes.evaluation import examples_from_cases, load_cases, measure_cases

    cfg = _config(ctx)
    cases = [c for path in cases_files for c in load_cases(path)]
    if not cases:
        raise click.ClickException("no cases to score")
    registry = None
    if tools_file or any(c.tools is None for c in cases):
        registry = _registry(cfg, tools_file)
    if examples_file:
        if registry is None:
            raise click.ClickException("--examples needs a shared registry (--tools or the built-in packs)")
        registry = registry.with_examples(examples_from_cases(load_cases(examples_file), per_tool, cases))
    factory = _factory(cfg)
    bar = functools.partial(tqdm, desc="routing", unit="case", file=sys.stderr, leave=False)
    return cfg, measure_cases(factory, cases, registry, progress=bar)


@cli.command("eval")
@click.option("--cases", "cases_files", multiple=True, required=True, type=click.Path(),
              help="Cases file (JSONL); repeat to pool several.")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file for cases without inline tools.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
@click.option("--examples", "examples_file", type=click.Path(),
              help="Labelled cases whose messages become card examples (any message being scored is left out).")
@click.option("--examples-per-tool", default=50, show_default=True, help="Most examples taken per tool.")
@click.pass_context
@cli_errors
def eval_cmd(ctx: click.Context, cases_files: tuple[str, ...], tools_file: str | None, as_json: bool,
             examples_file: str | None, examples_per_tool: int) -> None:
    """Score the router on labelled cases."""
    from funes.evaluation import score
    from funes.report import format_report

    _, measured = _measure(ctx, cases_files, tools_file, examples_file, examples_per_tool)
    report = score(measured)
    click.echo(json.dumps(report) if as_json else format_report(report))


@cli.command()
@click.option("--cases", "cases_files", multiple=True, required=True, type=click.Path(),
              help="Cases file (JSONL); repeat to pool several.")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file for cases without inline tools.")
@click.option("--out", "out_file", required=True, type=click.Path(), help="Config file to write.")
@click.option("--examples", "examples_file", type=click.Path(),
              help="Labelled cases whose messages become card examples (any message being scored is left out).")
@click.option("--examples-per-tool", default=50, show_default=True, help="Most examples taken per tool.")
@click.pass_context
@cli_errors
def calibrate(ctx: click.Context, cases_files: tuple[str, ...], tools_file: str | None, out_file: str,
              examples_file: str | None, examples_per_tool: int) -> None:
    """Fit thresholds on part of the cases, report before/after on the held-out rest, write a config file."""
    from funes.calibration import calibrate as fit
    from funes.report import format_calibration

    cfg, measured = _measure(ctx, cases_files, tools_file, examples_file, examples_per_tool)
    result = fit(measured, cfg)
    existing = settings_module.read_file(ctx.obj["config_file"]) if ctx.obj.get("config_file") else {}
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump({**existing, **result.settings}, f, indent=2, sort_keys=True)
        f.write("\n")
    click.echo(format_calibration(result, out_file))


@cli.command()
@click.option("--cases", "cases_files", multiple=True, required=True, type=click.Path(),
              help="Cases file whose messages are routed (repeat to pool several).")
@click.option("--tools", "tools_files", multiple=True, type=click.Path(),
              help="A further registry to time beside the built-in packs (e.g. the pooled BFCL tools).")
@click.option("--limit", default=200, show_default=True, help="Messages taken from the cases.")
@click.option("--repeat", default=3, show_default=True, help="Passes over the messages.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@cli_errors
def bench(ctx: click.Context, cases_files, tools_files, limit: int, repeat: int, as_json: bool) -> None:
    """Route latency (p50/p95 ms, one encoder thread) of the built-in packs and other registries, side by side."""
    from tqdm import tqdm

    from funes.bench import route_latency
    from funes.evaluation import load_cases
    from funes.tools.loaders import load_file

    cfg = _config(ctx)
    factory = _factory(cfg)
    routers = {"builtin": factory.router(_registry(cfg, None))}
    for path in tools_files:
        routers[path.rsplit("/", 1)[-1]] = factory.router(load_file(path))
    messages = [c.messages for path in cases_files for c in load_cases(path)][:limit]
    report = route_latency(routers, messages, repeat, progress=lambda it: tqdm(it, desc="bench", file=sys.stderr))
    report["settings"] = {k: cfg[k] for k in ("EMBED_BACKEND", "EMBED_QUANTIZE", "EMBED_THREADS")}
    if as_json:
        click.echo(json.dumps(report))
        return
    for name, r in report.items():
        if name != "settings":
            click.echo(f"{name:<32} tools {r['tools']:>5}  p50 {r['p50']:7.3f} ms  p95 {r['p95']:7.3f} ms  "
                       f"p50 ratio {r['p50_ratio_to_builtin']:.2f}")
    click.echo(f"settings: {report['settings']}")


@cli.command("bench-chat")
@click.option("--cases", "cases_file", required=True, type=click.Path(), help="Cases file (e.g. seed_dev.jsonl).")
@click.option("-n", "n", default=10, show_default=True, help="Messages taken, spread over the file.")
@click.option("--out", "out_file", type=click.Path(), help="Also write the full JSON report here.")
@click.pass_context
@cli_errors
def bench_chat(ctx: click.Context, cases_file: str, n: int, out_file: str | None) -> None:
    """/chat end to end with the configured LLM: Funes-routed tools versus all tools in every prompt."""
    import tempfile

    from tqdm import tqdm

    from funes import create_app, llm_from_settings
    from funes.bench import chat_turns, pick_cases
    from funes.evaluation import load_cases

    cfg = _config(ctx)
    cases = pick_cases(load_cases(cases_file), n)
    llm, tmp = llm_from_settings(cfg), tempfile.mkdtemp(prefix="funes-bench-")
    apps = {mode: create_app({"DATABASE_URL": f"sqlite:///{tmp}/{mode}.db", "OFFER_ALL_TOOLS": mode == "all_tools"},
                             llm=llm) for mode in ("routed", "all_tools")}
    report = chat_turns(apps, cases, progress=lambda it: tqdm(it, desc="chat", file=sys.stderr))
    report["settings"] = {k: cfg[k] for k in ("LLM_BACKEND", "LLM_THREADS", "LLM_OPTIONS")}
    if out_file:
        with open(out_file, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
    for mode, s in report["summary"].items():
        click.echo(f"{mode:<10} median {s['median_seconds']:6.1f} s/turn  median prompt tokens "
                   f"{s['median_prompt_tokens']:7.0f}  expected tool called {s['right']}/{s['n']}")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--workers", default=1, show_default=True, type=int,
              help="gunicorn worker processes (each loads the encoder; with the embedded LLM, each its own model).")
@click.option("--threads", default=4, show_default=True, type=int, help="Threads per worker.")
@click.pass_context
@cli_errors
def serve(ctx: click.Context, host: str, port: int, workers: int, threads: int) -> None:
    """Run the chat service under gunicorn."""
    from funes.server import run

    if ctx.obj.get("config_file"):
        os.environ[settings_module.ENV_PREFIX + "CONFIG_FILE"] = ctx.obj["config_file"]
    run(host, port, workers, threads)


@cli.command()
@click.option("-n", "limit", default=20, show_default=True, help="How many, newest first.")
@click.option("--path", type=click.Choice(["tools", "memory", "route"]), help="Only this path.")
@click.option("--tool", help="Only decisions that selected this tool.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON lines.")
@click.pass_context
@cli_errors
def decisions(ctx: click.Context, limit: int, path: str | None, tool: str | None, as_json: bool) -> None:
    """Show recent routing decisions from the decision log."""
    from funes import database_url
    from funes.db import Database
    from funes.decisions import DecisionLog

    rows = DecisionLog(Database(database_url(_config(ctx)))).query(limit=limit, path=path, tool=tool)
    for r in rows:
        if as_json:
            click.echo(json.dumps(r, ensure_ascii=False))
            continue
        tools = ",".join(r["selected"]) or "-"
        ms = r["timings"].get("turn") or r["timings"].get("total") or 0.0
        click.echo(f"{r['id']:>6}  {r['created_at'][:19]}  {r['path']:<6} {r['decided_by']:<9} {tools:<40} "
                   f"{r['outcome']:<15} {ms:8.1f} ms  {r['message'][:60]!r}")


def _memory(ctx: click.Context):
    from funes import database_url
    from funes.db import Database
    from funes.selection.factory import encoder_from_config
    from memory.store import MemoryStore
    from memory.store import metadata as memory_metadata

    cfg = _config(ctx)
    db = Database(database_url(cfg), extra=(memory_metadata,))
    store = MemoryStore(db.engine, encoder_from_config(cfg).encode_query, top_k=cfg["MEMORY_TOP_K"],
                        min_score=cfg["MEMORY_MIN_SCORE"])
    return cfg, store


@cli.group()
def memory() -> None:
    """Long-term memory: ingest documents, search what a user's memory holds."""


@memory.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--user", "user_id", default="anonymous", show_default=True, help="Whose memory.")
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
@click.option("--user", "user_id", default="anonymous", show_default=True, help="Whose memory.")
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


@cli.command("settings")
def settings_cmd() -> None:
    """Print every setting with its default and help, as a Markdown table."""
    click.echo("| environment variable | default | what it does |\n|---|---|---|")
    for s in settings_module.SETTINGS:
        click.echo(f"| `{settings_module.ENV_PREFIX}{s.name}` | `{json.dumps(s.default)}` | {s.help} |")


def main() -> None:
    cli(prog_name="python -m funes")


if __name__ == "__main__":
    main()
