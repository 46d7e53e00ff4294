"""Card commands: enrich a tools file with generated examples, negatives and keywords."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import click

from funes.cli import _need_file, _parts, cli, cli_errors


@cli.group()
def cards() -> None:
    """Tool cards: enrich bare cards so they route like the packs' written ones."""


@cards.command("enrich")
@click.argument("path", type=click.Path())
@click.option("--pack", help="Only the cards of this pack.")
@click.option("--out", "out", type=click.Path(), required=True,
              help="Where to write the enriched cards (.json or .jsonl).")
@click.pass_context
@cli_errors
def enrich_cmd(ctx: click.Context, path: str, pack: str | None, out: str) -> None:
    """Write, for each card in PATH, example requests, negatives and keywords with the configured LLM.

    Reads each card's name, description and parameters only. Results are kept in the database (the service's
    too, so it routes them), so an interrupted run resumes where it stopped; a card that failed is tried again."""
    _need_file(path, "tools")  # before the imports below and the encoder and LLM load
    if not Path(out).resolve().parent.is_dir():
        raise click.ClickException(f"{out}: its directory does not exist")
    from funes.cards import enrich
    from funes.tools.loaders import load_cards, read_cards

    rows = [(where, data) for where, data in read_cards(path) if not pack or data.get("pack") == pack]
    if not rows:
        raise click.ClickException(f"{path}: no cards" + (f" of pack {pack!r}" if pack else ""))
    registry = load_cards([data for _, data in rows], path)
    parts = _parts(ctx)
    failed, fresh = [], []
    with click.progressbar(length=len(registry), label=f"enriching with {parts.llm.model}",
                           file=click.get_text_stream("stderr"), item_show_func=lambda name: name) as bar:
        def progress(tool, result, new):
            if isinstance(result, Exception):
                failed.append(str(result))
            elif new:
                fresh.append(result["seconds"])
            bar.update(1, tool.name)
        s = parts.settings
        enriched = enrich(registry, parts.llm, parts.text_encoder, s["DATA_DIR"], progress, seed=s["ENRICH_SEED"],
                          temperature=s["ENRICH_TEMPERATURE"], store=parts.enrichment.cache.store)
    cards_out = [{**data, "generated": tool.generated.to_dict()} if tool.generated else data
                 for (_, data), tool in zip(rows, enriched)]
    _write_cards(Path(out), cards_out)
    for message in failed:
        click.echo(f"skipped: {message}", err=True)
    done = sum(1 for t in enriched if t.generated)
    cost = f"; {len(fresh)} written now, median {statistics.median(fresh):.1f} s per card" if fresh else ""
    click.echo(f"wrote {out}: {done} of {len(cards_out)} cards enriched{cost}")


def _write_cards(path: Path, cards_out: list[dict]) -> None:
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cards_out)
    else:
        text = json.dumps(cards_out, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
