"""Training the encoder: pairs from the public layout and the synthetic tools, batches, a short real fine-tune."""
import json
import random
from pathlib import Path

from funes.training.encoder import batches, train
from funes.training.public import SYNTHETIC, Pair, training_pairs


def _tiny_public(root):
    """shared/eval/public's MetaTool layout, made of a slice of the synthetic data (so no evaluation set)."""
    (root / "metatool").mkdir(parents=True)
    (root / "bfcl").mkdir()
    (root / "metatool/metatool_tools.jsonl").write_text((SYNTHETIC / "synthetic2_tools.jsonl").read_text())
    lines = (SYNTHETIC / "synthetic2_cases.jsonl").read_text().splitlines()[:30]
    (root / "metatool/metatool_single.jsonl").write_text("\n".join(lines) + "\n")


def test_pairs_come_from_the_public_layout_and_the_synthetic_tools(tmp_path):
    _tiny_public(tmp_path)
    pairs = training_pairs(tmp_path, per_tool=3, seed=1)
    assert pairs == training_pairs(tmp_path, per_tool=3, seed=1)  # the seed fixes the order
    requests = {p.request for p in pairs}
    assert len(requests) == len({(p.request, p.tool) for p in pairs})
    synthetic = [json.loads(line) for line in (SYNTHETIC / "synthetic_cases.jsonl").read_text().splitlines()]
    one = next(c for c in synthetic if len(c["expected_tools"]) == 1 and len(c["messages"]) == 1)
    pair = next(p for p in pairs if p.request == one["messages"][0]["content"])
    assert pair.tool.startswith(one["expected_tools"][0].replace("_", " ") + ":")
    assert pair.negative and pair.negative != pair.tool  # a sibling tool of the same pack
    assert not any(c["expected_tools"] == [] and c["messages"][-1]["content"] in requests for c in synthetic)


def test_batches_never_hold_a_tool_or_a_request_twice():
    pairs = [Pair(f"request {i}", f"tool {i % 5}") for i in range(40)]
    out = batches(pairs, 8, random.Random(0))
    assert sorted(p.request for b in out for p in b) == sorted(p.request for p in pairs)  # each pair once
    for batch in out:
        assert len({p.tool for p in batch}) == len(batch) <= 5  # five tools: a sixth pair would repeat one


def test_a_short_fine_tune_saves_a_model_that_embeds(tmp_path):
    from sentence_transformers import SentenceTransformer

    from funes.selection.encoder import minilm_path

    pairs = [Pair("start printing benchy", "start print: Start a print job.", "cancel print: Cancel the print."),
             Pair("how warm is the hotend", "get hotend temperature: Read the hotend temperature."),
             Pair("water the basil now", "start irrigation: Open a zone's valve."),
             Pair("is the soil dry in bed 2", "get soil moisture: Read a zone's moisture sensor.")]
    report = train(minilm_path(), pairs, tmp_path / "model", epochs=1, batch_size=4, threads=1)
    assert report["steps"] == 1 and report["pairs"] == 4 and report["cpu_s"] > 0
    model = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert model.encode(["hello"]).shape == (1, 384)


def test_the_low_rank_delta_rebuilds_the_fine_tuned_model(tmp_path):
    """What ships is MiniLM's change, truncated to a low rank: MiniLM plus it embeds like the fine-tuned model."""
    from pathlib import Path

    import numpy as np
    from sentence_transformers import SentenceTransformer

    from funes.selection.encoder import minilm_path
    from funes.selection.tuned import assemble, low_rank_delta

    pairs = [Pair(f"start print job {i}", f"start print {i}: Start print job {i}.") for i in range(8)]
    train(minilm_path(), pairs, tmp_path / "tuned", epochs=1, batch_size=8, threads=1, lr=1e-3)
    report = low_rank_delta(Path(minilm_path()), tmp_path / "tuned", tmp_path / "delta.safetensors", rank=16)
    assert report["bytes"] < 2_000_000  # against 90 MB of weights
    assemble(Path(minilm_path()), tmp_path / "delta.safetensors", tmp_path / "assembled")
    texts = ["start printing benchy", "how warm is the hotend", "who wrote Hamlet?"]
    base, tuned, rebuilt = (SentenceTransformer(str(p), device="cpu").encode(texts, normalize_embeddings=True)
                            for p in (minilm_path(), tmp_path / "tuned", tmp_path / "assembled"))
    moved = 1 - (base * tuned).sum(axis=1)
    missed = 1 - (rebuilt * tuned).sum(axis=1)
    assert moved.max() > 1e-3  # the fine-tune moved the vectors ...
    assert np.all(missed < moved / 10)  # ... and the delta carries that move


def test_no_training_message_is_one_of_an_evaluation_set():
    """Training data never holds a message of the seed sets or the bench/ probes, not even "hi there"."""
    from tests.conftest import SHARED_EVAL

    root = Path(__file__).resolve().parent.parent
    held_out = [*root.glob("bench/*_cases.jsonl"), Path(SHARED_EVAL) / "seed_dev.jsonl"]
    seen = {m["content"].strip().lower() for path in held_out if path.is_file()
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            for m in json.loads(line)["messages"] if isinstance(m.get("content"), str)}
    assert len(seen) > 1000
    for path in sorted(SYNTHETIC.glob("*_cases.jsonl")):
        texts = {json.loads(line)["messages"][0]["content"].strip().lower()
                 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
        assert not texts & seen, f"{path.name}: {sorted(texts & seen)[:5]}"
