"""Would the server a tool belongs to help put the right bare card first?

    .venv/bin/python bench/order_features.py --eval ../shared/eval

Each case of the training corpus (funes/training/data/registries) and of every bare row of the accuracy floor
is measured as Funes routes it (bare cards, the shipped encoder). A conditional logit (a softmax over the
registry's cards) is fitted on the corpus' single-turn requests that need a tool, over features of each card:
its similarity (what the gate's pick is the argmax of) and its group's best and top-3 mean similarity (the
group: an MCP tool's `server`, else the card's `pack`), each less the registry's best: retrieval over tools and
their servers in one score. Printed per row, on the cases that need a tool: how often the right tool is first
by similarity alone and by the logit.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.eval.rows import ROWS, parts_for, path  # noqa: E402
from funes.eval.scoring import _case, load_cases, measure_cases  # noqa: E402
from funes.selection.policy import similarity  # noqa: E402
from funes.tools.loaders import load_cards, load_file  # noqa: E402
from funes.training.public import registry_cases  # noqa: E402

FEATURES = ("similarity", "group best", "group top-3")


def card_features(ev, groups: np.ndarray, settings: dict) -> np.ndarray:
    """One row per card: the message's similarity, and its group's best and top-3 mean (less the best)."""
    sim = similarity(ev, settings)[0]
    best, top3 = np.zeros_like(sim), np.zeros_like(sim)
    for g in set(groups):
        mask = groups == g
        ranked = np.sort(sim[mask])[::-1]
        best[mask], top3[mask] = ranked[0], ranked[:3].mean()
    return np.stack([sim, best - sim.max(), top3 - sim.max()], axis=1).astype(np.float64)


def measured(parts, cases: list, registry, groups: list[str], single_only: bool) -> list[tuple]:
    """(features, right cards) of each case that needs a tool."""
    names = [t.name for t in registry]
    out = []
    for m in measure_cases(parts.factory, cases, registry):
        if not m.case.expected or (single_only and len(m.case.messages) > 1):
            continue
        right = np.asarray([n in m.case.acceptable for n in names], dtype=np.float64)
        out.append((card_features(m.evidence, np.asarray(groups), parts.settings), right))
    return out


def _groups(tools_path: str, registry) -> list[str]:
    """Each card's group: the `server` an MCP tools file names, else its pack."""
    raw = json.loads(Path(tools_path).read_text()) if tools_path.endswith(".json") else {}
    servers = {t["name"]: t.get("server") for t in (raw.get("tools", []) if isinstance(raw, dict) else raw)}
    return [servers.get(t.name) or t.pack for t in registry]


def fit(data: list[tuple]) -> np.ndarray:
    """The conditional logit's weights: the most likelihood for the right cards."""
    def loss(w):
        total, grad = 0.0, np.zeros_like(w)
        for x, right in data:
            s = x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            mass = float(p @ right) + 1e-12
            total -= np.log(mass)
            grad -= (p * right / mass - p) @ x
        return total / len(data) + 1e-4 * w @ w, grad / len(data) + 2e-4 * w
    w0 = np.zeros(len(FEATURES))
    w0[0] = 10.0
    return minimize(loss, w0, jac=True, method="L-BFGS-B").x


def first(data: list[tuple], weights: np.ndarray) -> float:
    return float(np.mean([right[int(np.argmax(x @ weights))] for x, right in data])) if data else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", required=True, help="shared/eval (for seed_dev and seed_tools)")
    args = ap.parse_args()
    parts = parts_for()
    train = []
    for name, cards, cases in registry_cases():
        registry = load_cards(cards, name)
        train += measured(parts, [_case(c, f"{name}:{i}") for i, c in enumerate(cases)], registry,
                          [t.pack for t in registry], single_only=True)
    weights = fit(train)
    print(f"fitted on {len(train)} corpus requests: {dict(zip(FEATURES, np.round(weights, 2).tolist()))}")
    alone = np.eye(len(FEATURES))[0]
    print("| row | n | similarity | with its group |\n|---|---|---|---|")
    for name, kind, cases_t, tools_t in ROWS:
        if kind != "bare":
            continue
        tools_path = path(tools_t, args.eval)
        registry = load_file(tools_path)
        data = measured(parts, load_cases(path(cases_t, args.eval)), registry, _groups(tools_path, registry), False)
        print(f"| {name} | {len(data)} | {first(data, alone):.3f} | {first(data, weights):.3f} |", flush=True)


if __name__ == "__main__":
    main()
