"""The benchmark scripts that stay in bench/ run as they are, on tiny inputs (their figures are in docs/results.md)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mixed_compares_a_users_tools_beside_the_packs_with_them_alone(tmp_path, data_dir):
    tools = tmp_path / "home.jsonl"
    tools.write_text(json.dumps({"name": "set_light", "description": "Turn a light on or off, or dim it",
                                 "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}) + "\n")
    cases = tmp_path / "cases.jsonl"
    rows = [("turn off the kitchen lights", ["set_light"]), ("How much did I spend on groceries last month?",
                                                              ["analyze_by_category"]), ("Write a haiku about rain", [])]
    cases.write_text("".join(json.dumps({"id": f"c{i}", "messages": [{"role": "user", "content": m}],
                                         "expected_tools": e, "tags": []}) + "\n" for i, (m, e) in enumerate(rows)))
    packs = tmp_path / "packs.jsonl"
    packs.write_text("".join(line for line in cases.read_text().splitlines(keepends=True) if "set_light" not in line))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}, "FUNES_DATA_DIR": data_dir,
           "FUNES_ENRICH": "off", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "bench/mixed.py", str(cases), str(tools), "--packs-cases", str(packs),
                           "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["served"]["n"] == 3 and out["user_cases"]["alone"]["n"] == out["user_cases"]["served"]["n"] == 1
    assert out["user_cases"]["served"]["lenient"] == 1.0  # set_light beside the packs
    assert out["packs_cases"]["packs"]["n"] == out["packs_cases"]["served"]["n"] == 2


def _env(data_dir: str) -> dict:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}, "FUNES_DATA_DIR": data_dir,
            "HF_HUB_OFFLINE": "1"}


def test_cosine_baseline_tunes_its_threshold_on_the_cases(tmp_path, data_dir):
    tools = tmp_path / "tools.jsonl"
    tools.write_text("".join(json.dumps({"name": n, "description": d}) + "\n" for n, d in [
        ("get_weather", "Current weather and forecast for a city"), ("set_light", "Turn a light on or off")]))
    cases = tmp_path / "cases.jsonl"
    rows = [("is it raining in Oslo?", ["get_weather"]), ("switch off the lamp", ["set_light"]), ("tell me a joke", [])]
    cases.write_text("".join(json.dumps({"id": f"c{i}", "messages": [{"role": "user", "content": m}],
                                         "expected_tools": e}) + "\n" for i, (m, e) in enumerate(rows)))
    done = subprocess.run([sys.executable, "bench/cosine_baseline.py", str(cases), str(tools)], cwd=ROOT,
                          env=_env(data_dir), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cosine baseline: threshold" in done.stdout and "lenient accuracy 1.000" in done.stdout


def test_keys_load_accounts_for_every_row(data_dir):
    done = subprocess.run([sys.executable, "bench/keys_load.py", "--users", "2", "--requests", "12", "--clients", "2",
                           "--workers", "1", "--threads", "4"], cwd=ROOT, env=_env(data_dir), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cells = [c.strip() for c in done.stdout.strip().splitlines()[-1].strip("|").split("|")]
    answered, errors, lost, untold, wrong_user, cross_reads = (cells[0], cells[1], *cells[5:9])
    assert int(answered) > 0 and errors == "0", done.stdout
    assert (lost, untold, wrong_user) == ("0", "0", "0") and cross_reads.startswith("0 of "), done.stdout


def test_first_chat_times_two_turns_after_the_ready_line(data_dir):
    from tests.wire import JsonServer

    def respond(request):  # OpenAI's wire protocol: any turn gets a short greeting
        if request["method"] == "GET":
            return 200, {"data": [{"id": "fake"}]}
        return 200, {"choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "Doing well, thanks!"}}]}

    llm = JsonServer(respond)
    try:
        env = {**_env(data_dir), "FUNES_LLM_BACKEND": "openai", "FUNES_OPENAI_BASE_URL": llm.url + "/v1",
               "FUNES_SAMPLE_DATA": "false"}
        done = subprocess.run([sys.executable, "bench/first_chat.py"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
    finally:
        llm.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith("ready after ") and "ratio" in done.stdout and "Doing well" in done.stdout
    assert len([r for r in llm.requests if r["method"] == "POST"]) == 2  # one LLM call per turn


def test_chat_enrich_times_turns_idle_and_while_a_card_is_enriched(data_dir):
    import time

    from tests.wire import JsonServer

    texts = {"direct": ["do the thing for me"], "indirect": ["could you handle that"], "terse": ["thing"],
             "long": ["I would like you to do the thing now, please"], "spanish": [], "vietnamese": [],
             "hinglish": [], "followup": [], "no_tool": ["What is a thing?"], "keywords": ["thing"]}

    def respond(request):  # OpenAI's wire protocol: chat at once, an enrichment prompt after 3 s
        if request["method"] == "GET":
            return 200, {"data": [{"id": "fake"}]}
        enrich = "response_format" in request["json"]
        if enrich:
            time.sleep(3)
        content = json.dumps(texts) if enrich else "Hello!"
        return 200, {"choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}]}

    llm = JsonServer(respond)
    try:
        env = {**_env(data_dir), "FUNES_LLM_BACKEND": "openai", "FUNES_OPENAI_BASE_URL": llm.url + "/v1"}
        done = subprocess.run([sys.executable, "bench/chat_enrich.py", "-n", "1", "--pause", "0.5"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600)
    finally:
        llm.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "/chat median: idle" in done.stdout and "while enriching" in done.stdout
    assert any("response_format" in (r["json"] or {}) for r in llm.requests)  # enrichment was under way
