"""Proxy commands: bench-proxy."""
from __future__ import annotations

import json
import logging
import sys
import tempfile
import threading
from contextlib import contextmanager

import click

from funes.cli import cli, cli_errors


@cli.command("bench-proxy")
@click.option("--cases", "cases_file", required=True, type=click.Path(), help="Cases whose messages are sent.")
@click.option("--tools", "tools_file", required=True, type=click.Path(), help="The tools the client holds.")
@click.option("-n", "n", default=100, show_default=True, help="Messages taken, spread over the file.")
@click.option("--repeat", default=3, show_default=True, help="Passes over the messages.")
@click.option("--tokenizer", type=click.Choice(["embedded", "chars"]), default="embedded", show_default=True,
              help="Count tool tokens with the embedded model's own tokenizer, or as characters / 4.")
@click.option("--e2e", "e2e", type=int, default=0, help="Also N turns with the embedded llama.cpp server as the "
              "upstream: every tool straight to it, or through Funes, a client running the calls (slow: 5-20 s a turn).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@cli_errors
def bench_proxy(ctx: click.Context, cases_file: str, tools_file: str, n: int, repeat: int, tokenizer: str,
                e2e: int, as_json: bool) -> None:
    """A client holding TOOLS, through Funes' /api/chat or straight to an instant upstream: ms added, tokens saved."""
    from funes.eval.proxy_bench import as_functions
    from funes.eval.scoring import load_cases
    from funes.tools.loaders import read_cards

    cards = [data for _, data in read_cards(tools_file)]
    cases = load_cases(cases_file)
    report = _overhead(cards, cases[::max(1, len(cases) // n)][:n], repeat, tokenizer)
    if e2e:
        report["end_to_end"] = _end_to_end(ctx, cases, as_functions(cards), e2e)
    if as_json:
        click.echo(json.dumps(report))
        return
    t = report["tokens"]
    click.echo(f"{report['requests']} requests, {t['tools']} tools: direct p50 {report['direct_ms']['p50']} ms, "
               f"through Funes p50 {report['proxy_ms']['p50']} ms; added p50 {report['added_ms']['p50']} ms, "
               f"p95 {report['added_ms']['p95']} ms; POST /route p50 {report['route_ms']['p50']} ms")
    click.echo(f"tool tokens ({tokenizer}): all {t['all_tools_tokens']}, forwarded median "
               f"{t['forwarded_tokens_median']:.0f} (mean {t['forwarded_tokens_mean']}, median "
               f"{t['tools_forwarded_median']:.0f} tools): {t['saved_share']:.1%} saved")
    for mode, s in report.get("end_to_end", {}).get("summary", {}).items():
        click.echo(f"end to end, {mode:<6}: right tool behaviour {s['right']}/{s['n']} over the client's loop, "
                   f"{s['right_first_answer']}/{s['n']} in the first answer; median {s['median_seconds']:.1f} s per turn")


@contextmanager
def _served(app):
    """The app on a loopback port (werkzeug, threaded) while the block runs."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access line per request otherwise
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def _overhead(cards: list[dict], cases: list, repeat: int, tokenizer: str) -> dict:
    """Milliseconds added and tool tokens saved, against an instant upstream; cards routed bare."""
    from tqdm import tqdm

    from funes import create_app
    from funes.eval.proxy_bench import InstantUpstream, as_functions, overhead, tool_tokens

    tools = as_functions(cards)
    bodies = [{"model": "bench", "messages": c.messages, "tools": tools, "stream": False} for c in cases]
    upstream = InstantUpstream()
    with tempfile.TemporaryDirectory() as tmp:  # bare: no background enrichment mid-run
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/proxy.db", "OLLAMA_HOST": upstream.url, "PACKS": [],
                          "TOOLS_FILES": [], "ENRICH": "off"})
        with _served(app) as url:
            overhead(url, upstream.url, bodies[:1], cards, 1)  # the routers over these tools are built on first use
            upstream.tools_seen.clear()
            report = overhead(url, upstream.url, bodies, cards, repeat,
                              lambda it: tqdm(it, unit="req", file=sys.stderr))
        llm = app.extensions["funes"].llm
        count = llm.count_tokens if tokenizer == "embedded" else (lambda text: len(text) / 4)
        report.update(tokenizer=tokenizer, tokens=tool_tokens(tools, upstream.tools_seen, count))
    upstream.close()
    return report


def _end_to_end(ctx: click.Context, cases: list, tools: list[dict], n: int) -> dict:
    """The embedded model as the upstream, one app in front of it: every tool direct, or Funes' selection.

    The cards route enriched where DATA_DIR's enrichment cache holds them, else bare."""
    from tqdm import tqdm

    from funes import create_app
    from funes.cli import _parts
    from funes.eval.bench import pick_cases
    from funes.eval.proxy_bench import end_to_end

    parts = _parts(ctx)
    llm = parts.llm
    if not hasattr(llm, "start"):
        raise click.ClickException("--e2e runs the embedded model; unset FUNES_LLM_BACKEND")
    base = llm.start().url.removesuffix("/v1/chat/completions")  # the embedded backend's llama.cpp server
    with tempfile.TemporaryDirectory() as tmp:
        # cards as the enrichment cache has them (`cards enrich` the tools file first to measure them enriched)
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/e2e.db", "OPENAI_BASE_URL": f"{base}/v1", "PACKS": [],
                          "TOOLS_FILES": []}, encoder=parts.encoder, text_encoder=parts.text_encoder,
                         llm=llm)
        with _served(app) as url:
            return end_to_end(url, base, pick_cases(cases, n), tools, parts.settings["LLM_MAX_TOKENS"],
                              lambda it: tqdm(it, unit="turn", file=sys.stderr))
