"""`funes tools`: every configured tool, where it came from, whether it runs here, and its card's state."""
from __future__ import annotations

import click

from funes.cli import _parts, cli, cli_errors


@cli.command("tools")
@click.pass_context
@cli_errors
def tools_cmd(ctx: click.Context) -> None:
    """List the configured tools: name, source, runnable, card state (reason).

    A card's state: written (it has examples), enriched (generated texts), or for a bare card queued, enriching,
    failed (retried later), waiting (the LLM is remote under FUNES_ENRICH=auto) or bare."""
    parts = _parts(ctx)
    registry = parts.registry
    parts.packs  # noqa: B018  (the packs' handlers bound: what runs here)
    states = parts.enrichment.card_states(list(registry))
    rows = [(t.name, t.source or "-", "yes" if t.runnable else _why_not(t),
             f"{state} ({reason})" if reason else state) for t, (state, reason) in zip(registry, states)]
    header = ("name", "source", "runnable", "card")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    summary = parts.enrichment.summary(list(registry), states)
    if summary["total"]:
        where = "local" if summary["local"] else "remote"
        click.echo(f"\n{summary['done']} of {summary['total']} bare cards enriched (FUNES_ENRICH={summary['mode']}, "
                   f"LLM {summary['model']}, {where})")


def _why_not(tool) -> str:
    """'no', with the reason where it is a passing one (an MCP server that is down)."""
    down = getattr(tool, "unavailable", None)
    return f"no: {down}" if down else "no"
