"""The command line: python -m funes route | eval | calibrate | bench | serve | decisions | memory | ..."""
from __future__ import annotations

import functools
import json
import logging
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


def _parts(ctx: click.Context):
    """Funes' parts over the settings (defaults, --config file, FUNES_* environment), built as they are used."""
    from funes.build import build

    return build(settings_module.load(path=ctx.obj.get("config_file")))


def _registry(parts, tools_file: str | None, served: bool = False):
    """The cards of a tools file (bare ones with their generated texts where cached), or the configured ones;
    `served`: the tools file's cards beside the configured ones, as the service would route them."""
    from funes.tools.loaders import load_file
    from funes.tools.registry import Registry

    if tools_file and served:
        registry = Registry([*parts.registry, *load_file(tools_file)])
    else:
        registry = load_file(tools_file) if tools_file else parts.registry
    return parts.enrichment.apply(registry)


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



def main() -> None:
    cli(prog_name="python -m funes")


from funes.cli import cards, data, keys, mcp, proxy, routing, serve, tools  # noqa: E402,F401  (each module registers its commands)
