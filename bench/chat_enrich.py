"""/chat latency while the service enriches bare cards in the background, against the same turns with it idle.

Usage (the embedded model by default; any FUNES_* setting applies):
    FUNES_DATA_DIR=instance python bench/chat_enrich.py -n 5
One LLM serves both phases: first `n` turns with enrichment off (idle), then `n` turns while the service
enriches bench/probe_domains_tools.jsonl under a fresh sampling seed (so no card is done yet), a pause
between turns letting enrichment start again. Prints each phase's median and their ratio (target <= 1.5x).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes import create_app  # noqa: E402
from funes.llm import backend_from_settings  # noqa: E402

TOOLS = Path(__file__).resolve().parent / "probe_domains_tools.jsonl"
MESSAGES = ("Hi! How are you today?", "What is the capital of Portugal?", "Tell me a fun fact about owls.",
            "How do I boil an egg?", "Why is the sky blue?", "Give me a synonym for happy.")


def turns(app, n: int, pause_s: float, enriching=lambda: True) -> list[float]:
    """Seconds of `n` /chat turns, each sent `pause_s` after the last ended and once `enriching()` holds."""
    client, took = app.test_client(), []
    for i in range(n):
        time.sleep(pause_s)
        deadline = time.monotonic() + 120
        while not enriching() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = time.perf_counter()
        response = client.post("/chat", json={"message": MESSAGES[i % len(MESSAGES)]})
        assert response.status_code == 200, response.get_data(as_text=True)
        took.append(time.perf_counter() - started)
        print(f"  turn {i + 1}: {took[-1]:.1f} s", file=sys.stderr)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="turns per phase")
    parser.add_argument("--pause", type=float, default=8.0, help="seconds between turns (enrichment restarts)")
    args = parser.parse_args()
    settings = config.load()
    llm = backend_from_settings(settings)  # one LLM for both phases, as in the service
    tmp = tempfile.mkdtemp(prefix="funes-bench-enrich-")
    common = {"PACKS": [], "TOOLS_FILES": [str(TOOLS)], "SAMPLE_DATA": False, "MAX_TOOLS": 1}
    idle = create_app({**common, "ENRICH": "off", "DATABASE_URL": f"sqlite:///{tmp}/idle.db"}, llm=llm)
    turns(idle, 1, 0)  # warm-up: starts the model, loads the encoder
    print("idle:", file=sys.stderr)
    quiet = turns(idle, args.n, args.pause)
    busy_app = create_app({**common, "ENRICH": "on", "ENRICH_SEED": random.randrange(10**6),
                           "DATABASE_URL": f"sqlite:///{tmp}/busy.db"}, llm=llm)
    parts = busy_app.extensions["funes"]
    print("enriching:", file=sys.stderr)

    def enriching() -> bool:
        return "enriching" in {s for s, _ in parts.enrichment.card_states(list(parts.registry))}
    busy = turns(busy_app, args.n, args.pause, enriching)
    tools = list(parts.registry)
    done = parts.enrichment.summary(tools, parts.enrichment.card_states(tools))["done"]
    parts.enrichment.stop()
    q, b = statistics.median(quiet), statistics.median(busy)
    print(f"/chat median: idle {q:.2f} s, while enriching {b:.2f} s: {b / q:.2f}x over {args.n} turns each "
          f"({done} cards enriched meanwhile; LLM {llm.model})")


if __name__ == "__main__":
    main()
