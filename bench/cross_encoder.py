"""A finished study: does a cross-encoder, reading the message and a card together, reorder the router's top 5
bare candidates for the better?

    .venv/bin/python bench/cross_encoder.py train --out /tmp/ce --steps 1000   # ~24 min on 2 cores
    .venv/bin/python bench/cross_encoder.py eval --eval ../shared/eval --model /tmp/ce

`train` starts from the tuned encoder's weights (a BERT with a fresh one-logit head) and learns from the
corpus' whole registries only (funes/training/data/registries): per single-turn request, its tool against the
four wrong cards the tuned encoder ranks closest (a listwise loss), and a no-tool request's two closest cards
scored towards "not needed". `eval` routes every bare row of the accuracy floor as `bench/rows.py` does and
reorders each case's first five candidates by the cross-encoder's logit + W x the router's score; it prints
the right tool first, of the cases that need one, for the router and for each W, and the time a message.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.eval.rows import ROWS, parts_for, path, registry_for  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases  # noqa: E402
import config  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.selection.tuned import tuned_path  # noqa: E402
from funes.training.public import _text, registry_cases  # noqa: E402

K, MAX_TOKENS, GROUPS_A_STEP, SEED = 5, 64, 8, 7
WEIGHTS = (0.0, 10.0, 20.0)


def groups(embed) -> tuple[list, list]:
    """(request, its tool's text, the closest wrong cards' texts) per request needing a tool, and (request, its
    two closest cards' texts) per no-tool request, over every registry of the corpus."""
    needed, none = [], []
    for _, cards, cases in registry_cases():
        text = {c["name"]: _text(c) for c in cards}
        names = list(text)
        cases = [c for c in cases if len(c["messages"]) == 1]
        if not cases:
            continue
        requests = [c["messages"][0]["content"] for c in cases]
        order = np.argsort(-(embed(requests) @ embed([text[n] for n in names]).T), axis=1)
        for i, case in enumerate(cases):
            closest = [names[j] for j in order[i]]
            if not case["expected_tools"]:
                none.append((requests[i], [text[n] for n in closest[:2]]))
                continue
            right = set(case.get("acceptable_tools") or []) | set(case["expected_tools"])
            wrong = [n for n in closest if n not in right][: K - 1]
            if len(wrong) == K - 1:
                needed.append((requests[i], text[case["expected_tools"][0]], [text[n] for n in wrong]))
    rng = random.Random(SEED)
    rng.shuffle(needed)
    rng.shuffle(none)
    return needed, none


def train(out: str, steps: int, lr: float = 3e-5) -> None:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    init = tuned_path(config.load({})["DATA_DIR"])
    encoder = SentenceTransformer(init, device="cpu")
    needed, none = groups(lambda t: encoder.encode(t, batch_size=128, normalize_embeddings=True))
    print(f"{len(needed)} requests needing a tool, {len(none)} needing none", flush=True)
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForSequenceClassification.from_pretrained(init, num_labels=1).train()
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps))
    started = time.perf_counter()
    for step in range(min(steps, len(needed) // GROUPS_A_STEP)):
        batch = needed[step * GROUPS_A_STEP:(step + 1) * GROUPS_A_STEP]
        loss = _loss(torch, model, tok, batch, [none[(2 * step + j) % len(none)] for j in range(2)])
        optim.zero_grad()
        loss.backward()
        optim.step()
        sched.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f} {time.perf_counter() - started:.0f} s", flush=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"wrote {out}: {steps} steps, {time.perf_counter() - started:.0f} s", flush=True)


def _loss(torch, model, tok, batch: list, extra: list):
    """Listwise cross-entropy over each request's K cards (its tool first), plus each card's own BCE: the right
    one towards needed, the wrong ones and the no-tool requests' cards towards not."""
    queries = [r for r, _, _ in batch for _ in range(K)] + [r for r, cs in extra for _ in cs]
    cards = [c for _, pos, neg in batch for c in [pos, *neg]] + [c for _, cs in extra for c in cs]
    logits = model(**tok(queries, cards, padding=True, truncation="longest_first", max_length=MAX_TOKENS,
                         return_tensors="pt")).logits.squeeze(-1)
    grouped, unneeded = logits[: len(batch) * K].view(len(batch), K), logits[len(batch) * K:]
    labels = torch.zeros_like(grouped)
    labels[:, 0] = 1.0
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    return (torch.nn.functional.cross_entropy(grouped, torch.zeros(len(batch), dtype=torch.long))
            + 0.5 * (bce(grouped, labels) + bce(unneeded, torch.zeros_like(unneeded))))


def evaluate(eval_dir: str, model_dir: str) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    parts, means = parts_for(), {w: [] for w in ("router", *WEIGHTS)}
    for name, kind, cases, tools in ROWS:
        if kind != "bare":
            continue
        firsts, spent = {w: [] for w in means}, []
        registry = registry_for(parts, kind, path(tools, eval_dir))
        text = {t.name: head_text(t) for t in registry}
        for m in measure_cases(parts.factory, load_cases(path(cases, eval_dir)), registry):
            if not m.case.expected or len(m.case.messages) != 1:
                continue
            top = m.router.decide(m.evidence).candidates[:K]
            started = time.perf_counter()
            with torch.no_grad():
                logit = model(**tok([m.evidence.message] * len(top), [text[c.name] for c in top], padding=True,
                                    truncation="longest_first", max_length=MAX_TOKENS, return_tensors="pt")
                              ).logits.squeeze(-1).numpy()
            spent.append((time.perf_counter() - started) * 1000)
            right = [c.name in m.case.acceptable for c in top]
            firsts["router"].append(right[0])
            for w in WEIGHTS:
                firsts[w].append(right[int(np.argmax(logit + w * np.asarray([c.score for c in top])))])
        for w, hits in firsts.items():
            means[w].append(float(np.mean(hits)))
        print(f"{name:<19} n={len(spent):<4} " + "  ".join(f"{_label(w)} {np.mean(h):.3f}" for w, h in firsts.items())
              + f"  {np.median(spent):.0f} ms a message", flush=True)
    print("mean of the rows".ljust(26) + "  ".join(f"{_label(w)} {np.mean(v):.3f}" for w, v in means.items()))


def _label(w) -> str:
    return "router" if w == "router" else f"W={w:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("train", "eval"))
    ap.add_argument("--out", help="train: the model directory to write")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--eval", help="eval: shared/eval (for seed_dev and seed_tools)")
    ap.add_argument("--model", help="eval: the model directory `train` wrote")
    args = ap.parse_args()
    if args.step == "train":
        train(args.out, args.steps)
    else:
        evaluate(args.eval, args.model)


if __name__ == "__main__":
    main()
