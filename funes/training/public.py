"""Training pairs from the public sets (MetaTool, MIT; BFCL, Apache-2.0) and the synthetic tools in data/."""
from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from funes.selection.index import head_text
from funes.selection.multilingual import looks_non_english
from funes.tools.registry import Tool

# The sets read, and the registry each one's cases route over (inline: the case's own `tools`).
METATOOL = ("metatool/metatool_single.jsonl", "metatool/metatool_tools.jsonl")
BFCL_POOLED = ("bfcl/bfcl_v4_pooled_cases.jsonl", "bfcl/bfcl_v4_pooled_tools.jsonl")
SYNTHETIC = Path(__file__).with_name("data")
REGISTRIES = SYNTHETIC / "registries"  # whole registries of 10-120 tools, written by helpers (PROVENANCE.md)
# more cases over the same registries, every one non-English (written later: its own PROVENANCE.md)
MULTILINGUAL = SYNTHETIC / "multilingual"
Embed = Callable[[list[str]], np.ndarray]  # texts -> unit vectors
BFCL_INLINE = ("bfcl/bfcl_v4_live_multiple.jsonl", "bfcl/bfcl_v4_multiple.jsonl", "bfcl/bfcl_v4_live_simple.jsonl")


@dataclass(frozen=True)
class Pair:
    """A request, the text of the tool it needs, and a hard negative: a sibling's or the closest wrong card's text
    (or "")."""

    request: str
    tool: str
    negative: str = ""


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _text(card: dict) -> str:
    return head_text(Tool(name=card["name"], description=card.get("description", "")))


def _single(case: dict) -> str | None:
    """The one tool a single-turn case needs, or None."""
    if len(case["messages"]) != 1 or len(case.get("expected_tools", [])) != 1:
        return None
    return case["expected_tools"][0]


def metatool_pairs(root: Path, per_tool: int, rng: random.Random) -> list[Pair]:
    """MetaTool's single-tool requests, at most `per_tool` a tool (its wording is templated: more overfits)."""
    cases, tools = (root / p for p in METATOOL)
    if not cases.is_file():
        return []
    text = {t["name"]: _text(t) for t in _lines(tools)}
    by_tool: dict[str, list[str]] = defaultdict(list)
    for case in _lines(cases):
        name = _single(case)
        if name in text:
            by_tool[name].append(case["messages"][0]["content"])
    pairs = []
    for name, requests in sorted(by_tool.items()):
        rng.shuffle(requests)
        pairs += [Pair(r, text[name]) for r in requests[:per_tool]]
    return pairs


def bfcl_pairs(root: Path) -> list[Pair]:
    """BFCL's pooled single-tool cases, and its inline multi-tool cases with a sibling tool as the negative."""
    cases, tools = (root / p for p in BFCL_POOLED)
    text = {t["id"]: _text(t) for t in _lines(tools)} if cases.is_file() else {}
    pooled = _lines(cases) if text else []
    pairs = [Pair(c["messages"][0]["content"], text[c["expected_tool_ids"][0]]) for c in pooled
             if _single(c) and len(c.get("expected_tool_ids", [])) == 1 and c["expected_tool_ids"][0] in text]
    for path in (root / p for p in BFCL_INLINE):
        for case in _lines(path) if path.is_file() else []:
            name = _single(case)
            cards = {t["name"]: t for t in case.get("tools", [])}
            if name not in cards:
                continue
            others = [_text(t) for n, t in cards.items() if n != name]
            pairs.append(Pair(case["messages"][-1]["content"], _text(cards[name]), others[0] if others else ""))
    return pairs


def synthetic_pairs(data: Path, rng: random.Random) -> list[Pair]:
    """The synthetic tools' requests (domains in no evaluation set), a sibling of the same pack as the negative."""
    pairs = []
    for cases in sorted(data.glob("*_cases.jsonl")):
        cards = {t["name"]: t for t in _lines(cases.with_name(cases.name.replace("_cases", "_tools")))}
        for case in _lines(cases):
            name = _single(case)
            if name in cards:
                siblings = [t for n, t in cards.items() if n != name and t.get("pack") == cards[name].get("pack")]
                negative = _text(rng.choice(siblings)) if siblings else ""
                pairs.append(Pair(case["messages"][0]["content"], _text(cards[name]), negative))
    return pairs


def registry_cases(data: Path = REGISTRIES, more: Path = MULTILINGUAL) -> list[tuple[str, list[dict], list[dict]]]:
    """Each registry of the corpus: its name, its cards and its cases (with those over it in `more`)."""
    out = []
    for cases in sorted(data.glob("*_cases.jsonl")):
        tools, extra = cases.with_name(cases.name.replace("_cases", "_tools")), more / cases.name
        out.append((cases.name.removesuffix("_cases.jsonl"), _lines(tools),
                    _lines(cases) + (_lines(extra) if extra.is_file() else [])))
    return out


def registry_pairs(data: Path, embed: Embed | None, rng: random.Random) -> list[Pair]:
    """Each single-turn request of the corpus with each tool it needs; its negative is the registry's wrong card
    closest to it under `embed` (mined: a sibling or a look-alike), or, without `embed`, a random wrong card."""
    pairs = []
    for _, cards, cases in registry_cases(data):
        text = {c["name"]: _text(c) for c in cards}
        names = list(text)
        cases = [c for c in cases if len(c["messages"]) == 1 and c["expected_tools"]]
        requests = [c["messages"][0]["content"] for c in cases]
        closest = _ranked(embed, requests, [text[n] for n in names]) if embed and cases else None
        for i, case in enumerate(cases):
            right = set(case.get("acceptable_tools") or []) | set(case["expected_tools"])
            pool = [names[j] for j in closest[i]] if closest is not None else rng.sample(names, k=len(names))
            wrong = [n for n in pool if n not in right]
            for name in case["expected_tools"]:
                pairs.append(Pair(requests[i], text[name], text[wrong[0]] if wrong else ""))
    return pairs


def _ranked(embed: Embed, requests: list[str], tools: list[str]) -> np.ndarray:
    """Per request, the tools' indices from closest to farthest."""
    return np.argsort(-(embed(requests) @ embed(tools).T), axis=1)


def training_pairs(root: str | Path, per_tool: int = 40, seed: int = 7, embed: Embed | None = None,
                   non_english: bool = False) -> list[Pair]:
    """Every public and synthetic pair, shuffled with `seed`, each (request, tool) once; `embed` mines the corpus'
    hard negatives; `non_english`: only the pairs whose request looks non-English."""
    rng = random.Random(seed)
    root = Path(root)
    pairs = (metatool_pairs(root, per_tool, rng) + bfcl_pairs(root) + synthetic_pairs(SYNTHETIC, rng)
             + registry_pairs(REGISTRIES, embed, rng))
    pairs = list({(p.request, p.tool): p for p in pairs}.values())
    rng.shuffle(pairs)
    return [p for p in pairs if looks_non_english(p.request)] if non_english else pairs
