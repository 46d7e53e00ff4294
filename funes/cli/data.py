"""Data commands: sample-data, and each pack's import of the user's own files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from funes.cli import _parts, cli, cli_errors


def load_samples(tool_context) -> list:
    """Write and import every pack's sample data whose tables are still empty."""
    return [report for _, report in sample_reports(tool_context)]


def sample_reports(tool_context) -> list[tuple[str, Any]]:
    """(pack, import report) for each sample file imported into a pack whose tables were still empty."""
    from funes.tools.context import pack_module

    reports = []
    for name in tool_context.settings["PACKS"]:
        module = pack_module(name)
        if module is not None and hasattr(module, "load_sample"):
            reports += [(name, report) for report in module.load_sample(tool_context)]
    return reports


def sample_line(pack: str, report) -> str:
    """One line for a sample import; its skipped rows (the sample's deliberate flaws) go to a file it names."""
    line = f"sample data: {pack} {Path(report.path).name}: {report.imported} imported"
    if not report.skipped:
        return line
    skipped = Path(f"{report.path}.skipped.txt")
    skipped.write_text("".join(f"{where}: {why}\n" for where, why in report.skipped), encoding="utf-8")
    return f"{line}, {len(report.skipped)} skipped (see {skipped})"


@cli.command("sample-data")
@click.pass_context
@cli_errors
def sample_data(ctx: click.Context) -> None:
    """Write each pack's sample data into DATA_DIR/sample and import it where the pack has no data yet."""
    reports = load_samples(_parts(ctx).tool_context)
    for report in reports:
        click.echo(report.summary())
    if not reports:
        click.echo("every pack already has data; nothing imported")


def _import(ctx: click.Context, pack: str, function: str, path: str, **kwargs) -> None:
    from funes.tools.context import pack_module

    report = getattr(pack_module(pack), function)(_parts(ctx).tool_context, path, **kwargs)
    click.echo(report.summary())


@cli.group()
def finance() -> None:
    """The finance pack's data: bank transactions."""


@finance.command("import")
@click.argument("path", type=click.Path())
@click.pass_context
@cli_errors
def finance_import(ctx: click.Context, path: str) -> None:
    """Import a bank CSV (date, description, amount, optional category and merchant)."""
    _import(ctx, "finance", "import_file", path)


@cli.group()
def watch() -> None:
    """The watch_history pack's data: a Google Takeout watch-history.json."""


@watch.command("import")
@click.argument("path", type=click.Path())
@click.pass_context
@cli_errors
def watch_import(ctx: click.Context, path: str) -> None:
    """Import YouTube watch history from Google Takeout (JSON)."""
    _import(ctx, "watch_history", "import_file", path)


@cli.group()
def trip() -> None:
    """The trip pack's data: places from OpenStreetMap, and city-guide text."""


@trip.command("import")
@click.argument("path", type=click.Path())
@click.pass_context
@cli_errors
def trip_import(ctx: click.Context, path: str) -> None:
    """Import places from an OpenStreetMap extract (.osm XML or GeoJSON)."""
    _import(ctx, "trip", "import_pois", path)


@trip.command("guide")
@click.argument("path", type=click.Path())
@click.option("--source", help="Source name shown in citations (default: the file name).")
@click.option("--url", help="URL cited for the guide (default: the file's file:// URL).")
@click.pass_context
@cli_errors
def trip_guide(ctx: click.Context, path: str, source: str | None, url: str | None) -> None:
    """Import Markdown or text city-guide text for retrieve_city_guidance."""
    _import(ctx, "trip", "import_guide", path, source=source, url=url)
