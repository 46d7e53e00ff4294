"""Proxy commands: bench-proxy."""
from __future__ import annotations

import json
import sys
import tempfile
import threading

import click

from funes.cli import cli, cli_errors


@cli.command("bench-proxy")
@click.option("--cases", "cases_file", required=True, type=click.Path(), help="Cases whose messages are sent.")
@click.option("--tools", "tools_file", required=True, type=click.Path(), help="The tools the client holds.")
@click.option("-n", "n", default=100, show_default=True, help="Messages taken, spread over the file.")
@click.option("--repeat", default=3, show_default=True, help="Passes over the messages.")
@click.option("--tokenizer", type=click.Choice(["embedded", "chars"]), default="embedded", show_default=True,
              help="Count tool tokens with the embedded model's own tokenizer, or as characters / 4.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@cli_errors
def bench_proxy(cases_file: str, tools_file: str, n: int, repeat: int, tokenizer: str, as_json: bool) -> None:
    """A client holding TOOLS, through Funes' /api/chat or straight to an instant upstream: ms added, tokens saved."""
    import logging

    from tqdm import tqdm
    from werkzeug.serving import make_server

    from funes import create_app
    from funes.eval.proxy_bench import InstantUpstream, as_functions, overhead, tool_tokens
    from funes.eval.scoring import load_cases
    from funes.tools.loaders import read_cards

    cards = [data for _, data in read_cards(tools_file)]
    tools = as_functions(cards)
    cases = load_cases(cases_file)
    cases = cases[::max(1, len(cases) // n)][:n]
    bodies = [{"model": "bench", "messages": c.messages, "tools": tools, "stream": False} for c in cases]
    upstream = InstantUpstream()
    with tempfile.TemporaryDirectory() as tmp:  # cards routed bare: no background enrichment mid-run
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/proxy.db", "OLLAMA_HOST": upstream.url, "PACKS": [],
                          "TOOLS_FILES": [], "ENRICH": "off"})
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access line per request otherwise
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}"
        overhead(url, upstream.url, bodies[:1], cards, 1)  # the routers over these tools are built on first use
        upstream.tools_seen.clear()
        report = overhead(url, upstream.url, bodies, cards, repeat,
                          lambda it: tqdm(it, unit="req", file=sys.stderr))
        llm = app.extensions["funes"].llm
        count = llm.count_tokens if tokenizer == "embedded" else (lambda text: len(text) / 4)
        report.update(tokenizer=tokenizer, tokens=tool_tokens(tools, upstream.tools_seen, count))
        server.shutdown()
    upstream.close()
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
