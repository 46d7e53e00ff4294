"""API keys: `keys add --user U [--operator]`, `keys list`, `keys revoke ID`."""
from __future__ import annotations

import json

import click

from funes.cli import _parts, cli, cli_errors


@cli.group()
def keys() -> None:
    """API keys: each names the user a caller acts as (with any key in force, every request needs one)."""


@keys.command("add")
@click.option("--user", required=True, help="The user the key acts as.")
@click.option("--operator", is_flag=True, help="May read every user's decisions and /metrics, and label.")
@click.pass_context
@cli_errors
def add(ctx: click.Context, user: str, operator: bool) -> None:
    """Make a key and print it (only its hash is stored: this is the one time it is shown)."""
    key, row = _parts(ctx).keys.add(user, operator)
    click.echo(key)
    click.echo(f"key {row['id']} for {row['user_id']}{' (operator)' if operator else ''}; "
               "send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'", err=True)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@cli_errors
def list_keys(ctx: click.Context, as_json: bool) -> None:
    """The keys table (ids, users, prefixes; never the keys)."""
    rows = _parts(ctx).keys.list()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        state = f"revoked {r['revoked_at'][:19]}" if r["revoked_at"] else "active"
        click.echo(f"{r['id']:>4}  {r['prefix']}…  {r['user_id']}{'  operator' if r['operator'] else ''}  {state}")


@keys.command("revoke")
@click.argument("key_id", type=int)
@click.pass_context
@cli_errors
def revoke(ctx: click.Context, key_id: int) -> None:
    """Revoke a key by its id: requests with it get a 401 from then on."""
    row = _parts(ctx).keys.revoke(key_id)
    click.echo(f"revoked key {row['id']} of {row['user_id']}")
