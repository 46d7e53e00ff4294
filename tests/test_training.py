"""Training the encoder: pairs from the public layout and the synthetic tools, batches, a short real fine-tune."""
import json
import random
from pathlib import Path

from funes.training.encoder import batches, train
from funes.training.public import SYNTHETIC, Pair, registry_pairs, training_pairs


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
    assert len(pairs) == len({(p.request, p.tool) for p in pairs})  # a two-tool request: a pair per tool
    synthetic = [json.loads(line) for line in (SYNTHETIC / "synthetic_cases.jsonl").read_text().splitlines()]
    one = next(c for c in synthetic if len(c["expected_tools"]) == 1 and len(c["messages"]) == 1)
    pair = next(p for p in pairs if p.request == one["messages"][0]["content"])
    assert pair.tool.startswith(one["expected_tools"][0].replace("_", " ") + ":")
    assert pair.negative and pair.negative != pair.tool  # a sibling tool of the same pack
    assert not any(c["expected_tools"] == [] and c["messages"][-1]["content"] in requests for c in synthetic)


def test_non_english_pairs_are_the_requests_e5_reads(tmp_path):
    """`non_english` keeps the pairs whose request looks non-English: the corpus' own and multilingual/'s."""
    from funes.selection.multilingual import looks_non_english
    from funes.training.public import MULTILINGUAL

    _tiny_public(tmp_path)
    every = training_pairs(tmp_path, per_tool=3, seed=1)
    foreign = training_pairs(tmp_path, per_tool=3, seed=1, non_english=True)
    assert foreign == [p for p in every if looks_non_english(p.request)] and len(foreign) > 5000
    cases = [json.loads(line) for line in (MULTILINGUAL / "h4_r01_cases.jsonl").open(encoding="utf-8")]
    added = {c["messages"][0]["content"] for c in cases if len(c["messages"]) == 1 and c["expected_tools"]}
    assert added & {p.request for p in foreign}


def test_a_corpus_request_is_paired_with_the_closest_wrong_card_of_its_registry(tmp_path, text_encoder):
    cards = [{"name": "start_print", "description": "Start a print job on the 3D printer.", "pack": "printer"},
             {"name": "cancel_print", "description": "Cancel the print job running on the 3D printer.",
              "pack": "printer"},
             {"name": "water_zone", "description": "Open an irrigation zone's valve.", "pack": "garden"}]
    cases = [{"id": "1", "messages": [{"role": "user", "content": "start printing the benchy file"}],
              "expected_tools": ["start_print"], "tags": []},
             {"id": "2", "messages": [{"role": "user", "content": "is 3D printing hard to learn?"}],
              "expected_tools": [], "tags": []}]
    for name, rows in (("r_tools.jsonl", cards), ("r_cases.jsonl", cases)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    mined = registry_pairs(tmp_path, text_encoder.embed, random.Random(0))
    assert [(p.request, p.tool.split(":")[0], p.negative.split(":")[0]) for p in mined] == [
        ("start printing the benchy file", "start print", "cancel print")]  # not the garden's card; no no-tool


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


def test_a_budgeted_fine_tune_stops_after_its_steps(tmp_path):
    """`--steps`: a trial on a slow machine trains the first batches only (here two of four)."""
    from funes.selection.encoder import minilm_path

    pairs = [Pair(f"water zone {i}", f"start irrigation {i}: Open zone {i}'s valve.") for i in range(8)]
    report = train(minilm_path(), pairs, tmp_path / "model", epochs=1, batch_size=2, threads=1, steps=2)
    assert report["steps"] == 2 and report["pairs"] == 8 and report["device"] == "cpu"
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_a_teacher_s_scores_are_learned_beside_the_labels(tmp_path):
    """Distillation: a teacher that puts each request nearest the *next* tool pulls the student that way; the
    labels alone keep each request on its own tool."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from funes.selection.encoder import minilm_path

    pairs = [Pair(f"{verb} the {thing}", f"{verb} {thing}: {verb.capitalize()} a {thing}.")
             for verb, thing in [("water", "garden"), ("print", "model"), ("lock", "door"), ("brew", "coffee")]]
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(384, 4)))[0].T
    teacher = {p.tool: basis[i] for i, p in enumerate(pairs)}
    teacher |= {p.request: basis[(i + 1) % 4] for i, p in enumerate(pairs)}

    def nearest(out):
        model = SentenceTransformer(str(out), device="cpu")
        q, t = (model.encode([getattr(p, f) for p in pairs], normalize_embeddings=True) for f in ("request", "tool"))
        return list((q @ t.T).argmax(axis=1))

    common = dict(epochs=8, batch_size=4, threads=1, lr=1e-4)
    train(minilm_path(), pairs, tmp_path / "labels", **common)
    report = train(minilm_path(), pairs, tmp_path / "taught", teacher=teacher, distill=20.0, **common)
    assert report["distill"] == 20.0
    assert nearest(tmp_path / "labels") == [0, 1, 2, 3]
    assert sum(got == (i + 1) % 4 for i, got in enumerate(nearest(tmp_path / "taught"))) >= 3


def test_train_encoder_cli_names_a_start_that_is_no_model(runner, tmp_path):
    """--init takes minilm, shipped or a sentence-transformers directory; anything else is named, no traceback."""
    from funes.cli import cli

    public = tmp_path / "public"
    (public / "metatool").mkdir(parents=True)
    (public / "bfcl").mkdir()
    result = runner.invoke(cli, ["train", "encoder", "--public", str(public), "--out", str(tmp_path / "out"),
                                 "--init", str(tmp_path)])
    assert result.exit_code != 0 and "not minilm, shipped, mpnet, or a sentence-transformers model directory" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
    result = runner.invoke(cli, ["train", "encoder", "--public", str(public), "--out", str(tmp_path / "out"),
                                 "--teacher", str(tmp_path)])
    assert result.exit_code != 0 and f"--teacher {tmp_path}: not minilm" in result.output


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


def _evaluation_messages() -> set[str]:
    from tests.conftest import SHARED_EVAL

    root = Path(__file__).resolve().parent.parent
    held_out = [*root.glob("bench/*_cases.jsonl"), Path(SHARED_EVAL) / "seed_dev.jsonl"]
    return {m["content"].strip().lower() for path in held_out if path.is_file()
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            for m in json.loads(line)["messages"] if isinstance(m.get("content"), str)}


def test_no_training_message_is_one_of_an_evaluation_set():
    """Training data never holds a message of the seed sets or the bench/ probes, not even "hi there"."""
    seen = _evaluation_messages()
    assert len(seen) > 1000
    for path in sorted(SYNTHETIC.rglob("*_cases.jsonl")):
        texts = {m["content"].strip().lower() for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip() for m in json.loads(line)["messages"]}
        assert not texts & seen, f"{path.name}: {sorted(texts & seen)[:5]}"


def test_no_training_tool_is_one_of_an_evaluation_registry():
    """No synthetic tool has the name or the description of a tool of the seed packs, a probe or an MCP server."""
    from tests.conftest import SHARED_EVAL

    root = Path(__file__).resolve().parent.parent
    tools = [json.loads(line) for path in [*root.glob("bench/*_tools.jsonl"), Path(SHARED_EVAL) / "seed_tools.jsonl"]
             if path.is_file() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tools += [t for path in root.glob("bench/*_tools.json") for t in json.loads(path.read_text(encoding="utf-8"))["tools"]]
    names = {t["name"].lower() for t in tools}
    descriptions = {t.get("description", "").strip().lower() for t in tools} - {""}
    assert len(names) > 250  # the packs, the probes, and 265 tools of 25 MCP servers
    for path in sorted(SYNTHETIC.rglob("*_tools.jsonl")):
        cards = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert not {c["name"].lower() for c in cards} & names, path.name
        assert not {c["description"].strip().lower() for c in cards} & descriptions, path.name


def test_the_non_english_cases_route_over_the_corpus_own_registries():
    """multilingual/ adds cases to registries the corpus has, in other languages, with their provenance."""
    from funes.selection.multilingual import looks_non_english
    from funes.training.public import MULTILINGUAL, REGISTRIES, registry_cases

    files = sorted(MULTILINGUAL.glob("*_cases.jsonl"))
    assert len(files) >= 40 and all((REGISTRIES / f.name).is_file() for f in files)
    own = {name: cases for name, _, cases in registry_cases()}
    added = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    last = {f.name.removesuffix("_cases.jsonl"): json.loads(f.read_text(encoding="utf-8").splitlines()[-1])
            for f in files}
    assert all(own[name][-1] == case for name, case in last.items())  # read after their registry's own cases
    foreign = sum(looks_non_english(c["messages"][-1]["content"]) for c in added) / len(added)
    assert len(added) >= 3000 and foreign >= 0.9
    assert 0.3 <= sum(not c["expected_tools"] for c in added) / len(added) <= 0.5
    assert f"{len(added):,} cases" in (MULTILINGUAL / "PROVENANCE.md").read_text(encoding="utf-8")


def test_the_corpus_is_whole_registries_every_case_over_its_own():
    """The corpus holds what its provenance claims, and every case's tools are in its registry."""
    from funes.training.public import REGISTRIES, registry_cases

    registries = registry_cases()
    tools = sum(len(cards) for _, cards, _ in registries)
    domains = {c["pack"] for _, cards, _ in registries for c in cards}
    cases = [c for _, _, cs in registries for c in cs]
    assert tools >= 2000 and len(domains) >= 300 and len(cases) >= 25000
    assert 0.3 <= sum(not c["expected_tools"] for c in cases) / len(cases) <= 0.5
    provenance = (REGISTRIES / "PROVENANCE.md").read_text(encoding="utf-8")
    for name, cards, own in registries:
        assert 10 <= len(cards) <= 120 and f"{name}_cases.jsonl" in provenance
        known = {c["name"] for c in cards}
        assert all(set(c["expected_tools"]) | set(c.get("acceptable_tools", [])) <= known for c in own), name
