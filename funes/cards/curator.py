"""What a registry is routed with: its cards, generated texts for bare ones once enriched, and people's corrections."""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from funes.cards.auto import AutoEnrichment
from funes.tools.registry import LABELS, Generated, Registry, Tool


class Curator:
    """`state` is cheap and changes whenever `prepare` would give something new (the factory polls it)."""

    def __init__(self, enrichment: AutoEnrichment | None = None, labels=None):
        self.enrichment = enrichment
        self.labels = labels  # a LabelLog where corrections are kept (the service's database)

    def state(self, registry: Registry, key: str) -> Hashable:
        enriched = self.enrichment.version(registry) if self.enrichment else None
        return enriched, self.labels.version(key) if self.labels else 0

    def prepare(self, registry: Registry, key: str) -> Registry:
        routed = self.enrichment.apply(registry) if self.enrichment else registry
        return with_corrections(routed, self.labels.labelled(key)) if self.labels else routed


def with_corrections(registry: Registry, labelled: list[dict]) -> Registry:
    """Labelled messages as texts to learn from: one tool -> its example; no tool -> a negative of what was picked."""
    examples: dict[str, list[str]] = {}
    negatives: dict[str, list[str]] = {}
    names = set(registry.names)
    for row in labelled:
        if len(row["tools"]) == 1 and row["tools"][0] in names:
            examples.setdefault(row["tools"][0], []).append(row["message"])
        elif not row["tools"]:
            for name in row["selected"]:
                negatives.setdefault(name, []).append(row["message"])
    if not labelled:
        return registry
    return Registry(_corrected(t, examples.get(t.name, ()), negatives.get(t.name, ())) for t in registry)


def _corrected(tool: Tool, examples: list[str], negatives: list[str]) -> Tool:
    """A written card learns labels as written texts; a user's bare or enriched card as generated ones, so it
    stays with the user's cards where a registry routes them apart (funes.selection.mixed)."""
    if not examples and not negatives:
        return tool
    if tool.bare or tool.generated is not None:
        texts = tool.generated or Generated(model=LABELS)
        return replace(tool, generated=replace(texts, examples=texts.examples + tuple(examples),
                                               negatives=texts.negatives + tuple(negatives)))
    return replace(tool, examples=tool.examples + tuple(examples), negatives=tool.negatives + tuple(negatives))
