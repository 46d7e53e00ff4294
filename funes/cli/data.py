"""Data commands: sample-data, and each pack's import of the user's own files."""
from __future__ import annotations

from pathlib import Path

import click

from funes.cli import _config, cli, cli_errors


def pack_context(ctx: click.Context):
    """A ToolContext over the configured database, with the encoder, for imports outside the service."""
    from funes import database_url
    from funes.db import Database
    from funes.selection.factory import encoder_from_config
    from funes.tools.context import ToolContext, pack_metadata

    cfg = _config(ctx)
    db = Database(database_url(cfg), extra=pack_metadata(cfg["PACKS"]))
    return ToolContext(db.engine, encoder_from_config(cfg).embed, Path(cfg["DATA_DIR"]), cfg)


def load_samples(tool_context) -> list:
    """Write and import every pack's sample data whose tables are still empty."""
    from funes.tools.context import pack_module

    reports = []
    for name in tool_context.settings["PACKS"]:
        module = pack_module(name)
        if module is not None and hasattr(module, "load_sample"):
            reports += module.load_sample(tool_context)
    return reports


@cli.command("sample-data")
@click.pass_context
@cli_errors
def sample_data(ctx: click.Context) -> None:
    """Write each pack's sample data into DATA_DIR/sample and import it where the pack has no data yet."""
    reports = load_samples(pack_context(ctx))
    for report in reports:
        click.echo(report.summary())
    if not reports:
        click.echo("every pack already has data; nothing imported")


def _import(ctx: click.Context, pack: str, function: str, path: str, **kwargs) -> None:
    from funes.tools.context import pack_module

    report = getattr(pack_module(pack), function)(pack_context(ctx), path, **kwargs)
    click.echo(report.summary())
