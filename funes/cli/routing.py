"""Routing commands: route, eval, calibrate, bench, bench-labels, settings."""
from __future__ import annotations

import functools
import json
import os
import sys

import click

import config as settings_module
from funes.cli import _need_file, _parts, _read_json, _registry, _tools, cli, cli_errors

@cli.command()
@click.argument("message")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file (JSON/JSONL); default: built-in packs.")
@click.option("--history", "history_file", type=click.Path(),
              help="JSON list of earlier {role, content} messages.")
@click.pass_context
@cli_errors
def route(ctx: click.Context, message: str, tools_file: str | None, history_file: str | None) -> None:
    """Print the routing Decision for MESSAGE as JSON."""
    # the inputs first: a missing or broken file is one line at once, not after the encoder has loaded
    history = _read_json(history_file, "history") if history_file else []
    if not isinstance(history, list):
        raise click.ClickException(f"{history_file}: history must be a JSON list of messages")
    tools = _tools(tools_file)
    parts = _parts(ctx)
    router = parts.factory.router(_registry(parts, tools))
    decision = router.select(history + [{"role": "user", "content": message}])
    click.echo(json.dumps(decision.to_dict(), indent=2, ensure_ascii=False))


def _measure(ctx, cases_files, tools_file, examples_file=None, per_tool=50, from_log=False, served=False):
    from tqdm import tqdm

    for path in (*cases_files, examples_file):  # the inputs first, before any import or model load
        _need_file(path, "cases")
    tools = _tools(tools_file)
    from funes.eval.scoring import examples_from_cases, load_cases, measure_cases

    cases = [c for path in cases_files for c in load_cases(path)]
    examples = load_cases(examples_file) if examples_file else None
    parts = _parts(ctx)
    if from_log:
        cases += _labelled_cases(parts, tools)
    if not cases:
        raise click.ClickException("no cases to score" + (
            "; label decisions first (POST /decisions/<id>/label or `decisions label`)" if from_log else ""))
    registry = None
    if tools is not None or any(c.tools is None for c in cases):
        registry = _registry(parts, tools, served)
    if examples is not None:
        if registry is None:
            raise click.ClickException("--examples needs a shared registry (--tools or the built-in packs)")
        registry = registry.with_examples(examples_from_cases(examples, per_tool, cases))
    bar = functools.partial(tqdm, desc="routing", unit="case", file=sys.stderr, leave=False)
    return parts.settings, measure_cases(parts.factory, cases, registry, progress=bar)


def _labelled_cases(parts, tools):
    """The labelled decisions of the registry calibrated (a tools file's, or the configured packs')."""
    from funes.eval.scoring import cases_from_labels

    source = tools if tools is not None else parts.registry
    return cases_from_labels(parts.labels.labelled(source.hash()))


@cli.command("bench-labels")
@click.option("--cases", "cases_file", required=True, type=click.Path(), help="Labelled cases (JSONL).")
@click.option("--tools", "tools_file", required=True, type=click.Path(), help="The cards the cases route over.")
@click.option("--share", default=0.5, show_default=True, help="Share of the cases labelled; the rest is scored.")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@cli_errors
def bench_labels(ctx: click.Context, cases_file: str, tools_file: str, share: float, seed: int, as_json: bool) -> None:
    """Label part of the cases through the HTTP API as a person would, then score the rest before and after."""
    import tempfile

    from tqdm import tqdm

    from funes import create_app
    from funes.eval.corrections import learn_from_labels
    from funes.eval.scoring import load_cases
    _need_file(cases_file, "cases")
    _need_file(tools_file, "tools")
    from funes.tools.loaders import load_cards, read_cards

    cards = [data for _, data in read_cards(tools_file)]
    # the cards must not change mid-run: background enrichment would land between "before" and "after"
    if not _parts(ctx).enrichment.ready(load_cards(cards, tools_file)):
        raise click.ClickException(f"{tools_file}: some bare cards are not enriched yet; run `python -m funes cards "
                                   "enrich` on it first, or set FUNES_ENRICH=off to measure them bare")
    with tempfile.TemporaryDirectory() as tmp:  # the labels go to a throwaway database, not the service's
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/labels.db", "PACKS": [], "TOOLS_FILES": []})
        bar = functools.partial(tqdm, unit="case", file=sys.stderr, leave=False)
        result = learn_from_labels(app.test_client(), load_cases(cases_file), cards, share, seed, bar)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"labelled {result['labelled']} cases through the API, scored {result['scored']} others "
               f"({result['cards']} cards)")
    for name in ("before", "after"):
        r = result[name]
        click.echo(f"{name:<7} lenient {r['lenient_accuracy']:.3f}  no-tool F1 {r['no_tool']['f1']:.3f}  "
                   f"recall@1 {r['recall_at']['1']:.3f}")


@cli.command("eval")
@click.option("--cases", "cases_files", multiple=True, required=True, type=click.Path(),
              help="Cases file (JSONL); repeat to pool several.")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file for cases without inline tools.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
@click.option("--examples", "examples_file", type=click.Path(),
              help="Labelled cases whose messages become card examples (any message being scored is left out).")
@click.option("--examples-per-tool", default=50, show_default=True, help="Most examples taken per tool.")
@click.option("--served", is_flag=True, help="Route --tools beside the configured packs and tools, as served.")
@click.pass_context
@cli_errors
def eval_cmd(ctx: click.Context, cases_files: tuple[str, ...], tools_file: str | None, as_json: bool,
             examples_file: str | None, examples_per_tool: int, served: bool) -> None:
    """Score the router on labelled cases."""
    _, measured = _measure(ctx, cases_files, tools_file, examples_file, examples_per_tool, served=served)
    from funes.eval.report import format_report
    from funes.eval.scoring import score

    report = score(measured)
    click.echo(json.dumps(report) if as_json else format_report(report))


@cli.command()
@click.option("--cases", "cases_files", multiple=True, type=click.Path(),
              help="Cases file (JSONL); repeat to pool several.")
@click.option("--from-log", "from_log", is_flag=True,
              help="Also the decisions people labelled for this registry (the service's database).")
@click.option("--tools", "tools_file", type=click.Path(), help="Tools file for cases without inline tools.")
@click.option("--out", "out_file", required=True, type=click.Path(), help="Config file to write.")
@click.option("--examples", "examples_file", type=click.Path(),
              help="Labelled cases whose messages become card examples (any message being scored is left out).")
@click.option("--examples-per-tool", default=50, show_default=True, help="Most examples taken per tool.")
@click.option("--served", is_flag=True, help="Route --tools beside the configured packs and tools, as served.")
@click.pass_context
@cli_errors
def calibrate(ctx: click.Context, cases_files: tuple[str, ...], from_log: bool, tools_file: str | None,
              out_file: str, examples_file: str | None, examples_per_tool: int, served: bool) -> None:
    """Fit thresholds on part of the cases, report before/after on the held-out rest, write a config file."""
    if not cases_files and not from_log:
        raise click.ClickException("give --cases FILE or --from-log")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out_file))):  # found out now, not after the measuring
        raise click.ClickException(f"{out_file}: its directory does not exist")
    cfg, measured = _measure(ctx, cases_files, tools_file, examples_file, examples_per_tool, from_log, served)
    from funes.eval.calibration import calibrate as fit
    from funes.eval.report import format_calibration

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
@click.option("--served", is_flag=True, help="Time each --tools registry beside the configured packs, as served.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@cli_errors
def bench(ctx: click.Context, cases_files, tools_files, limit: int, repeat: int, served: bool, as_json: bool) -> None:
    """Route latency (p50/p95 ms, one encoder thread) of the built-in packs and other registries, side by side."""
    from tqdm import tqdm

    from funes.eval.bench import route_latency
    from funes.eval.scoring import load_cases

    for path in cases_files:
        _need_file(path, "cases")
    extra = {path: _tools(path) for path in tools_files}  # read before the encoder loads
    parts = _parts(ctx)
    cfg = parts.settings
    routers = {"builtin": parts.router}
    for path, tools in extra.items():  # bare cards with their generated texts where enriched, as the service routes them
        router = parts.factory.router(_registry(parts, tools, served))
        routers[f"{path.rsplit('/', 1)[-1]} ({router.cards})"] = router
    messages = [c.messages for path in cases_files for c in load_cases(path)][:limit]
    report = route_latency(routers, messages, repeat, progress=lambda it: tqdm(it, desc="bench", file=sys.stderr))
    report["settings"] = {k: cfg[k] for k in ("EMBED_BACKEND", "EMBED_QUANTIZE", "EMBED_THREADS")}
    if as_json:
        click.echo(json.dumps(report))
        return
    for name, r in report.items():
        if name not in ("settings", "encode"):
            click.echo(f"{name:<32} tools {r['tools']:>5}  p50 {r['p50']:7.3f} ms  p95 {r['p95']:7.3f} ms  "
                       f"p50 ratio {r['p50_ratio_to_builtin']:.2f}  to one encode {r['p50_ratio_to_encode']:.2f}")
    click.echo(f"{'encode (the packs encoder alone)':<32} {'':>11}  p50 {report['encode']['p50']:7.3f} ms  "
               f"p95 {report['encode']['p95']:7.3f} ms")
    click.echo(f"settings: {report['settings']}")


@cli.command("settings")
def settings_cmd() -> None:
    """Print every setting with its default and help, as a Markdown table."""
    click.echo("| environment variable | default | what it does |\n|---|---|---|")
    for s in settings_module.SETTINGS:
        click.echo(f"| `{settings_module.ENV_PREFIX}{s.name}` | `{json.dumps(s.default)}` | {s.help} |")




def rules_table() -> str:
    """The cascades of funes.selection.policy as docs/routing.md's Markdown table."""
    from funes.selection.policy import RULES

    kinds = list(RULES)
    rules = list({r.name: r for cascade in RULES.values() for r in cascade}.values())
    lines = [f"| rule | {' | '.join(k.replace('_ungated', ', no gate') for k in kinds)} | fires when | settings |",
             "|---" * (len(kinds) + 3) + "|"]
    for rule in rules:
        marks = " | ".join("✓" if rule in RULES[k] else "" for k in kinds)
        settings = ", ".join(f"`{s}`" for s in rule.settings) or "—"
        lines.append(f"| `{rule.name}` | {marks} | {rule.gloss} | {settings} |")
    return "\n".join(lines)


@cli.command("rules")
def rules_cmd() -> None:
    """Print every routing rule, the cascades it is in, when it fires and its settings, as a Markdown table."""
    click.echo(rules_table())
