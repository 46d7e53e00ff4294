"""Fine-tune the sentence encoder on (request, tool text) pairs: in-batch negatives both ways, plus siblings;
optionally taught a stronger encoder's scores over the same candidates (distillation)."""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from funes.training.public import Pair

SCALE = 20.0  # cosine -> logit, as sentence-transformers' MultipleNegativesRankingLoss


def batches(pairs: list[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Shuffled batches in which no tool text (nor request) occurs twice: a duplicate would be a false negative."""
    pending = pairs[:]
    rng.shuffle(pending)
    out: list[list[Pair]] = []
    while pending:
        batch, seen, rest = [], set(), []
        for p in pending:
            if len(batch) < size and p.tool not in seen and p.request not in seen:
                batch.append(p)
                seen.update((p.tool, p.request))
            else:
                rest.append(p)
        out.append(batch)
        pending = rest
    return [b for b in out if len(b) > 1]


def _loss(torch, q, t, cand):
    """Symmetric in-batch InfoNCE; sibling negatives join the request->tool side's candidates."""
    labels = torch.arange(len(q), device=q.device)
    forward = torch.nn.functional.cross_entropy(SCALE * q @ cand.T, labels)
    backward = torch.nn.functional.cross_entropy(SCALE * t @ q.T, labels)
    return (forward + backward) / 2


def _distilled(torch, q, cand, teacher_q, teacher_cand):
    """KL from the teacher's distribution over a request's candidates to the student's: the soft ranking of every
    wrong card, which one hard label does not say."""
    target = torch.softmax(SCALE * teacher_q @ teacher_cand.T, dim=-1)
    return torch.nn.functional.kl_div(torch.log_softmax(SCALE * q @ cand.T, dim=-1), target, reduction="batchmean")


def _batch_loss(torch, embed: Callable, batch: list[Pair], teacher: dict | None, distill: float, device: str):
    """One batch's loss: InfoNCE over its requests, tools and hard negatives, plus the teacher's, if any."""
    requests, tools = [p.request for p in batch], [p.tool for p in batch]
    negs = [p.negative for p in batch if p.negative]
    q, t = embed(requests), embed(tools)
    cand = torch.cat([t, embed(negs)]) if negs else t
    loss = _loss(torch, q, t, cand)
    if teacher is None:
        return loss
    vecs = lambda texts: torch.as_tensor(np.stack([teacher[x] for x in texts]), device=device)
    return loss + distill * _distilled(torch, q, cand, vecs(requests), vecs(tools + negs))


def _on(features: dict, device: str) -> dict:
    """The tokenizer's tensors on the training device."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def _half(weights: Path) -> None:
    """Store the weights in float16: half the size on disk, cosine to float32 above 0.99999."""
    from safetensors.torch import load_file, save_file

    save_file({k: v.half().contiguous() for k, v in load_file(str(weights)).items()}, str(weights),
              metadata={"format": "pt"})


def train(model_path: str, pairs: list[Pair], out: str | Path, epochs: int = 1, batch_size: int = 64,
          lr: float = 2e-5, seed: int = 7, threads: int = 2, max_tokens: int = 64, steps: int | None = None,
          device: str = "cpu", teacher: dict[str, np.ndarray] | None = None, distill: float = 1.0,
          progress: Callable[[Iterable], Iterable] = iter) -> dict:
    """Fine-tune the model at `model_path` on `pairs` (the first `steps` batches only, if given), save it to
    `out`; returns what the run cost. `teacher` maps every text to a stronger encoder's normalised vector: its
    scores are then learned too, weighted `distill`."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    rng = random.Random(seed)
    model = SentenceTransformer(model_path, device=device)
    model.max_seq_length = max_tokens  # requests and tool heads are short; long BFCL descriptions cost, not teach
    model.train()
    plan = [b for _ in range(epochs) for b in batches(pairs, batch_size, rng)][:steps]
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    warmup = max(1, len(plan) // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, (len(plan) - step) / len(plan)))
    cpu0, wall0, losses = time.process_time(), time.perf_counter(), []
    for batch in progress(plan):
        embed = lambda texts: torch.nn.functional.normalize(
            model(_on(model.preprocess(texts), device))["sentence_embedding"], dim=-1)
        loss = _batch_loss(torch, embed, batch, teacher, distill, device)
        optim.zero_grad()
        loss.backward()
        optim.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    model.save(str(out))
    _half(Path(out) / "model.safetensors")
    return {"pairs": len(pairs), "steps": len(plan), "epochs": epochs, "seed": seed, "device": device,
            "distill": distill if teacher is not None else 0.0,
            "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1),
            "loss_first": round(float(np.mean(losses[:20])), 4), "loss_last": round(float(np.mean(losses[-20:])), 4)}
