"""What a registry is routed with: its cards, generated texts for bare ones once enriched, and people's corrections."""
from __future__ import annotations

from collections.abc import Hashable

from funes.cards.auto import AutoEnrichment
from funes.selection.router import cards_kind
from funes.tools.registry import Registry


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
        # Labels feed a classifier. Bare cards have none, and a few examples on the similarity path pull
        # unrelated messages to the labelled tools (measured: bench-labels): they wait for enrichment.
        if not self.labels or cards_kind(routed) == "bare":
            return routed
        return with_corrections(routed, self.labels.labelled(key))


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
    return registry.with_examples(examples, negatives) if labelled else registry
