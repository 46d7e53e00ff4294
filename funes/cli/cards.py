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
    too, so it routes them) as each card is done, so an interrupted run resumes where it stopped. A request the
    LLM does not answer is asked again a few times; a card that still fails is skipped with its reason (and tried
    again by the next run), and the command exits 1 after writing the others."""
    _need_file(path, "tools")  # before the imports below and the encoder and LLM load
    if not Path(out).resolve().parent.is_dir():
        raise click.ClickException(f"{out}: its directory does not exist")
    from funes.cards import enrich, fit
    from funes.tools.loaders import load_cards, read_cards

    rows = [(where, data) for where, data in read_cards(path) if not pack or data.get("pack") == pack]
    if not rows:
        raise click.ClickException(f"{path}: no cards" + (f" of pack {pack!r}" if pack else ""))
    registry = load_cards([data for _, data in rows], path)
    parts = _parts(ctx)
    tally, s = _Tally(), parts.settings
    with click.progressbar(length=len(registry), label=f"enriching with {parts.llm.model}",
                           file=click.get_text_stream("stderr"), item_show_func=lambda name: name) as bar:
        def progress(tool, result, new):
            tally.add(tool, result, new)
            bar.update(1, tool.name)
        try:
            enriched = enrich(registry, parts.llm, parts.text_encoder, s["DATA_DIR"], progress,
                              seed=s["ENRICH_SEED"], temperature=s["ENRICH_TEMPERATURE"],
                              store=parts.enrichment.cache.store)
        except KeyboardInterrupt:  # the cards done so far are stored already; OUT gets them too
            enriched = fit(registry, tally.raw, parts.text_encoder, parts.llm.model)
    _write_cards(Path(out), [{**data, "generated": tool.generated.to_dict()} if tool.generated else data
                             for (_, data), tool in zip(rows, enriched)])
    tally.report(out, sum(1 for t in enriched if t.generated), len(registry))
    if tally.seen < len(registry):
        click.echo(f"stopped (Ctrl-C) after {tally.seen} of {len(registry)} cards; "
                   "run the same command again to resume", err=True)
        ctx.exit(130)
    if tally.failed:
        raise click.ClickException(f"{len(tally.failed)} of {len(registry)} cards skipped (reasons above); "
                                   "run the same command again to retry them")


class _Tally:
    """What became of each card of a run: texts (by key), seconds of the ones written now, reasons of the skipped."""

    def __init__(self):
        self.raw: dict[str, dict] = {}
        self.fresh: list[float] = []
        self.failed: list[str] = []

    @property
    def seen(self) -> int:
        return len(self.raw) + len(self.failed)

    def add(self, tool, result: dict | Exception, new: bool) -> None:
        if isinstance(result, Exception):
            self.failed.append(str(result))
            return
        self.raw[tool.key] = result
        if new:
            self.fresh.append(result["seconds"])

    def report(self, out: str, done: int, total: int) -> None:
        """The skipped cards with their reasons, then one line: enriched, written now, already enriched."""
        for message in self.failed:
            click.echo(f"skipped: {message}", err=True)
        fresh, stored = self.fresh, len(self.raw) - len(self.fresh)
        cost = f"; {len(fresh)} written now, median {statistics.median(fresh):.1f} s per card" if fresh else ""
        kept = f"; {stored} already enriched, skipped" if stored else ""
        click.echo(f"wrote {out}: {done} of {total} cards enriched{cost}{kept}")


def _write_cards(path: Path, cards_out: list[dict]) -> None:
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cards_out)
    else:
        text = json.dumps(cards_out, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
