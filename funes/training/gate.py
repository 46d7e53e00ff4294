"""Fit the learned gate (funes.selection.gate) on public sets and synthetic tools outside every evaluation set."""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from funes.eval.scoring import Case, load_cases, measure_cases
from funes.selection import gate
from funes.selection.multilingual import looks_non_english
from funes.selection.ranking import rank_scores
from funes.selection.scorers import similarity_of
from funes.tools.loaders import load_file
from funes.training.public import MULTILINGUAL, REGISTRIES

DATA = Path(__file__).with_name("data")
# (cases, registry, most cases drawn): the registry is a tools file under the same root, or None for inline tools.
PUBLIC = (("metatool/metatool_awareness.jsonl", "metatool/metatool_tools.jsonl", 0),
          ("metatool/metatool_single.jsonl", "metatool/metatool_tools.jsonl", 1500),
          ("metatool/metatool_reliability_inline.jsonl", None, 600),
          ("metatool/metatool_multi_inline.jsonl", None, 400),
          ("bfcl/bfcl_v4_irrelevance.jsonl", None, 0),
          ("bfcl/bfcl_v4_live_irrelevance.jsonl", None, 600),
          ("bfcl/bfcl_v4_live_relevance.jsonl", None, 0),
          ("bfcl/bfcl_v4_live_simple.jsonl", None, 0),
          ("bfcl/bfcl_v4_live_multiple.jsonl", None, 600),
          ("bfcl/bfcl_v4_multiple.jsonl", None, 0),
          ("bfcl/bfcl_v4_simple_python.jsonl", None, 400),
          ("bfcl/bfcl_v4_parallel_multiple.jsonl", None, 0))
# The first two synthetic sets: the encoder also learns from the later ones, but a gate fitted on them too put
# questions lower (their near misses are mostly questions) and lost the MCP servers' tools (docs/results.md).
SYNTHETIC = (("synthetic_cases.jsonl", "synthetic_tools.jsonl", 0),
             ("synthetic2_cases.jsonl", "synthetic2_tools.jsonl", 0))


def _sample(cases: list[Case], most: int, seed: int) -> list[Case]:
    if not most or len(cases) <= most:
        return cases
    return random.Random(seed).sample(cases, most)


def sets(public: str | Path, seed: int, corpus: bool = True) -> list[tuple[str, list[Case], Path | None]]:
    """Every training set: its name, its cases and its tools file (None: inline tools); `corpus`: with the
    corpus' whole registries (funes/training/data/registries, and multilingual/ over them)."""
    out = []
    registries = tuple((p.name, p.name.replace("_cases", "_tools"), 0)
                       for p in sorted(REGISTRIES.glob("*_cases.jsonl"))) if corpus else ()
    foreign = tuple((f"{MULTILINGUAL.name}/{name}", f"{REGISTRIES.name}/{tools}", 0) for name, tools, _ in registries
                    if (MULTILINGUAL / name).is_file())  # more cases over the same registries, not in English
    for root, table in ((Path(public), PUBLIC), (DATA, SYNTHETIC + foreign), (REGISTRIES, registries)):
        for cases, tools, most in table:
            if (root / cases).is_file():
                out.append((cases, _sample(load_cases(str(root / cases)), most, seed), tools and root / tools))
    return out


Orders = list[tuple[np.ndarray, list[int]]]  # per message needing a tool: the cards' order score, its right cards


def examples(factory, cases: list[Case], tools: Path | None, progress: Callable[[Iterable], Iterable] = iter
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Orders]:
    """Features, message vectors and labels (needs a tool) of single-turn cases, over their bare cards; and
    the order score of the cards for those that need one."""
    cases = [c for c in cases if len(c.messages) == 1]
    registry = load_file(str(tools)) if tools else None
    feats, messages, labels, orders = [], [], [], []
    for m in progress(measure_cases(factory, cases, registry)):
        scorers, ev, s = m.router.scorers, m.evidence, m.router.settings
        if not scorers.tools:
            continue
        sim = similarity_of(ev.embedding, ev.lexical, ev.negative, s)
        feats.append(gate.features(sim[0], ev.embedding[0], ev.lexical[0], float(ev.none[0]), scorers.anchor_best(s)))
        messages.append(ev.message)
        labels.append(bool(m.case.expected))
        right = [i for i, t in enumerate(scorers.tools) if t.name in m.case.acceptable]
        if m.case.expected and right and ev.classifier is None:  # bare cards: their order is similarity's
            orders.append((rank_scores(sim, [0], ev.n_segments, s), right))
    vectors = factory.encoder.encode_query(messages)
    return np.asarray(feats, np.float32).reshape(-1, len(gate.FEATURES)), vectors, np.asarray(labels), orders


def train(factory, public: str | Path, out: str | Path, c: float = 1.0, seed: int = 7, corpus: bool = True,
          progress: Callable[[Iterable], Iterable] = iter, say: Callable[[str], None] = print,
          non_english: bool = False) -> gate.Gate:
    """Measure every training set over its bare cards, fit the gate, write it to `out`; `non_english`: from the
    cases whose message looks non-English only (those e5's gate decides when Funes serves)."""
    parts, counts, orders = [], {}, []
    for name, cases, tools in sets(public, seed, corpus):
        if non_english:
            cases = [c for c in cases if looks_non_english(c.messages[-1]["content"])]
        if not cases:
            continue
        *x, ordered = examples(factory, cases, tools, progress)
        counts[name] = {"cases": int(len(x[2])), "need_tool": int(x[2].sum())}
        say(f"{name}: {len(x[2])} cases, {int(x[2].sum())} need a tool")
        parts.append(x)
        orders += ordered
    feats, vectors, labels = (np.concatenate([p[i] for p in parts]) for i in range(3))
    fitted = gate.fit(feats, vectors, labels, gate.encoder_name(factory.encoder.model_id), c,
                      {"sets": counts, "c": c, "seed": seed, "corpus": corpus, "non_english": non_english},
                      gate.fit_temperature(orders))
    fitted.save(out)
    return fitted
