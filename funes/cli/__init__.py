"""The command line: python -m funes route | eval | calibrate | bench | serve | decisions | memory | ..."""
from __future__ import annotations

import functools
import json
import logging
import os
import sys

import click

import config as settings_module
from funes.errors import FunesError
from funes.version import version


def cli_errors(func):
    """Turn Funes and config errors into one-line CLI messages, not tracebacks."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (FunesError, ValueError) as e:
            raise click.ClickException(str(e)) from None
    return wrapper


def _settings(ctx: click.Context) -> dict:
    """The settings (defaults, --config file, FUNES_* environment), their tool sources checked to exist and their
    API keys to be well formed (a key too short made every request of a started service a 500)."""
    from funes.store.keys import configured_keys

    try:
        settings = settings_module.load(path=ctx.obj.get("config_file"))
        configured_keys(settings["API_KEYS"])
    except (ValueError, FunesError) as e:
        raise click.ClickException(str(e)) from None
    _check_sources(settings)
    return settings


def _parts(ctx: click.Context):
    """Funes' parts over the settings, built as they are used; the settings are read before anything is imported,
    so a bad setting or a missing file is reported at once, not after the encoder has loaded."""
    settings = _settings(ctx)
    from funes.build import build

    return build(settings)


def _check_sources(settings: dict) -> None:
    """Fail on a tools file or Python tool module that does not exist, before anything heavy is imported."""
    from funes.tools.sources import check_exist

    try:
        check_exist(settings)
    except FunesError as e:
        raise click.ClickException(str(e)) from None


def _need_file(path: str | None, what: str) -> None:
    """Fail at once when an input file given on the command line is missing (before any import or model load)."""
    if path is not None and not os.path.isfile(path):
        raise click.ClickException(f"{path}: {what} file " + ("expected, not a folder" if os.path.isdir(path)
                                                                  else "not found"))


def _tools(tools_file: str | None):
    """The cards of a tools file, read and checked (None without one): call before building parts."""
    if tools_file is None:
        return None
    _need_file(tools_file, "tools")
    from funes.tools.loaders import load_file

    try:
        return load_file(tools_file)
    except FunesError as e:
        raise click.ClickException(str(e)) from None


def _registry(parts, tools, served: bool = False):
    """The cards of a tools file (`_tools`; bare ones with their generated texts where cached), or the configured
    ones; `served`: the tools file's cards beside the configured ones, as the service would route them."""
    from funes.tools.registry import Registry

    if tools is not None and served:
        registry = Registry([*parts.registry, *tools])
    else:
        registry = tools if tools is not None else parts.registry
    return parts.enrichment.apply(registry)


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise click.ClickException(f"{path}: {what} file not found") from None
    except json.JSONDecodeError as e:
        raise click.ClickException(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"funes {version()}")
        ctx.exit()


@click.group()
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the version and exit.")
@click.option("--config", "config_file", type=click.Path(), help="JSON config file (e.g. written by calibrate).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """Funes: a local-first tool router for LLM assistants."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if config_file:  # a missing or broken config file is one line now, not after a command's imports
        _settings_file(config_file)
    ctx.obj = {"config_file": config_file}


def _settings_file(path: str) -> None:
    try:
        settings_module.read_file(path)
    except ValueError as e:
        raise click.ClickException(str(e)) from None



def main() -> None:
    cli(prog_name="python -m funes")


from funes.cli import cards, data, keys, mcp, proxy, routing, serve, tools, train  # noqa: E402,F401  (each module registers its commands)
