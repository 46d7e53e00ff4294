"""Does another model class make a better gate? The shipped logistic regression against an MLP and gradient
boosting, fitted on the same examples, each routing the accuracy floor's bare and served rows.

    .venv/bin/python bench/gate_models.py --eval ../shared/eval [--models lr,mlp,hgb]

The examples are `funes train gate`'s (public sets, the first synthetic sets and the corpus' registries, over
the configured encoder's bare cards): its eight registry-relative features, standardised, beside the message's
vector. Each candidate replaces the gate's P in the real routers; lenient accuracy is printed per row at each
GATE_THRESHOLD swept, then the means of the bare rows and of all of them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import funes.selection.gate as gate_module  # noqa: E402
from funes.eval.rows import ROWS, parts_for, path, registry_for  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases  # noqa: E402
from funes.training.gate import examples, sets  # noqa: E402

THRESHOLDS = (0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def candidate(name: str):
    """An unfitted classifier, class weights balanced where the class supports it (as the shipped gate)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    return {"lr": lambda: LogisticRegression(C=1.0, max_iter=5000, class_weight="balanced"),
            "mlp": lambda: MLPClassifier(hidden_layer_sizes=(64,), alpha=1e-3, early_stopping=True, random_state=7),
            "hgb": lambda: HistGradientBoostingClassifier(max_iter=300, class_weight="balanced", random_state=7)}[name]()


def training_examples(parts, public: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`funes train gate`'s features, message vectors and labels."""
    got = [examples(parts.factory, cases, tools)[:3] for _, cases, tools in sets(public, 7, True)]
    return tuple(np.concatenate([g[i] for g in got]) for i in range(3))


def sweep(parts, eval_dir: str) -> dict[str, list[float]]:
    """Lenient accuracy of every bare and served row at each threshold, under whatever Gate.proba is."""
    out = {}
    for name, kind, cases, tools in ROWS:
        if kind == "packs":
            continue
        measured = measure_cases(parts.factory, load_cases(path(cases, eval_dir)),
                                 registry_for(parts, kind, tools and path(tools, eval_dir)))
        out[name] = [np.mean([lenient_ok(m.case, set(m.router.tuned({"GATE_THRESHOLD": t}).picks(m.evidence)))
                              for m in measured]) for t in THRESHOLDS]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", required=True, help="shared/eval (its public/ holds the gate's public sets)")
    ap.add_argument("--models", default="lr,mlp,hgb")
    args = ap.parse_args()
    parts = parts_for()
    feats, vectors, labels = training_examples(parts, str(Path(args.eval) / "public"))
    mean, scale = feats.mean(axis=0), feats.std(axis=0) + 1e-6
    print(f"{len(labels)} examples, {labels.mean():.2f} need a tool; thresholds {THRESHOLDS}")
    for name in args.models.split(","):
        model = candidate(name).fit(np.hstack([(feats - mean) / scale, vectors]), labels)
        gate_module.Gate.proba = lambda self, vector, f, model=model: float(
            model.predict_proba(np.hstack([(f - mean) / scale, vector])[None])[0, 1])
        rows = sweep(parts, args.eval)
        for row, accs in rows.items():
            print(f"{name:<4} {row:<18} " + " ".join(f"{a:.3f}" for a in accs))
        bare = [r for r in rows if r.endswith(" bare")]
        for label, chosen in (("mean of bare rows", bare), ("mean of all rows", list(rows))):
            print(f"{name:<4} {label:<18} " + " ".join(f"{np.mean([rows[r][i] for r in chosen]):.3f}"
                                                       for i in range(len(THRESHOLDS))), flush=True)


if __name__ == "__main__":
    main()
