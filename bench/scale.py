"""Registries of 120 to 10,000 tools, served: start-up cold and warm, route p50/p95 over HTTP, memory.

    .venv/bin/python bench/scale.py [--sizes 120,1000,10000] [--requests 200] [--json]

For each size, generated tools (vendors x resources x verbs, from no evaluation set) are written to a tools file
and `funes serve` is started on them beside the packs, as a user would: first on an empty data dir (cold: every
card embedded), then again on the same data dir (warm: vectors from the disk cache). Start-up is the time from
the process start to its first answered POST /route; p50/p95 are the wall times of POST /route, one client,
sequential; memory is the resident set of serve's processes after the requests. The LLM is pointed at a closed
port: routing does not use it, and the embedded model's gigabyte would hide what the tools cost.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENDORS = ["acme", "zenith", "orbit", "nimbus", "quartz", "harbor", "lumen", "cobalt", "fable", "tundra"]
RESOURCES = [
    "invoice", "shipment", "ticket", "playlist", "sensor", "warehouse", "coupon", "lease", "vaccine_record",
    "greenhouse", "drone", "kiln", "locker", "parcel", "subscription", "timesheet", "payslip", "recipe",
    "menu_item", "table_booking", "room", "vehicle", "tire_set", "fuel_log", "route_plan", "bike_dock",
    "library_loan", "course", "exam", "grade", "badge", "volunteer_shift", "donation", "grant", "patent",
    "contract", "clause", "audit", "risk", "incident", "alarm", "camera", "door_lock", "thermostat",
    "irrigation_zone", "beehive", "herd", "milk_batch", "harvest", "seed_order", "pallet", "forklift",
    "crane", "container", "berth", "ferry", "flight_slot", "gate_assignment", "baggage_tag", "lounge_pass",
    "gift_card", "loyalty_account", "referral", "survey", "poll", "petition", "newsletter", "podcast_episode",
    "video_clip", "subtitle", "font", "palette", "mockup", "print_job", "scanner", "label_printer", "toner",
    "license_key", "device_lease", "sim_card", "phone_line", "voicemail", "fax", "meeting_room", "desk",
    "parking_spot", "visitor_pass", "badge_reader", "uniform", "locker_key", "medication", "lab_sample",
    "blood_test", "appointment_slot", "prescription", "therapy_note", "wheelchair", "hearing_aid", "pet_record",
]
VERBS = {"create": "Create a new {r} in {v}.", "get": "Get one {r} by its id from {v}.",
         "list": "List {r}s in {v}, newest first, with optional filters.", "update": "Change fields of a {r} in {v}.",
         "delete": "Delete a {r} from {v} permanently.", "search": "Search {v} {r}s by free text.",
         "export": "Export {r}s from {v} as CSV.", "archive": "Archive an old {r} in {v}.",
         "assign": "Assign a {r} in {v} to a person.", "schedule": "Schedule a {r} in {v} for a date."}
ASKS = {"create": "please create a {r} in {v} for Dana", "get": "show me {v} {r} 4471",
        "list": "list the latest {r}s in {v}", "update": "change the {r} 88 in {v} to next Friday",
        "delete": "delete {r} 12 from {v}", "search": "find {v} {r}s mentioning 'blue'",
        "export": "export all {v} {r}s to csv", "archive": "archive the old {r} 301 in {v}",
        "assign": "assign {v} {r} 55 to Marco", "schedule": "schedule the {r} in {v} for Monday"}


def tools(n: int) -> list[dict]:
    """The first n of vendors x resources x verbs, spread over vendors and verbs, as tool cards."""
    combos = [(v, r, verb) for r in RESOURCES for v in VENDORS for verb in VERBS]
    random.Random(7).shuffle(combos)
    return [{"name": f"{v}_{verb}_{r}", "description": VERBS[verb].format(r=r.replace("_", " "), v=v.title()),
             "parameters": {"type": "object", "properties": {"id": {"type": "string"}, "query": {"type": "string"}}}}
            for v, r, verb in combos[:n]]


def asks(cards: list[dict], k: int) -> list[str]:
    picked = random.Random(11).sample(cards, min(k, len(cards)))
    return [ASKS[c["name"].split("_")[1]].format(v=c["name"].split("_")[0].title(),
                                                  r=c["name"].split("_", 2)[2].replace("_", " ")) for c in picked]


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, in MB (from /proc)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total


@contextmanager
def served(tools_file: Path, data_dir: Path, probe: list[dict]) -> Iterator[tuple[httpx.Client, str, int, float]]:
    """A `funes serve` on the tools beside the packs, bare, until `probe` routes: client, /route URL, pid, start-up s."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}
    env.update(FUNES_DATA_DIR=str(data_dir), FUNES_TOOLS_FILES=json.dumps([str(tools_file)]), FUNES_ENRICH="off",
               FUNES_LLM_BACKEND="ollama", FUNES_OLLAMA_HOST="http://127.0.0.1:9", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-P", "-m", "funes", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/route"
    try:
        with httpx.Client(timeout=600) as client:
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"serve exited with {server.returncode} at {tools_file.name}")
                try:
                    if client.post(url, json={"messages": probe}).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.5)
            yield client, url, server.pid, time.perf_counter() - t0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def serve(tools_file: Path, data_dir: Path, messages: list[str]) -> dict:
    """One `funes serve`: its start-up, /route wall times over `messages`, and its memory after."""
    with served(tools_file, data_dir, messages[0]) as (client, url, pid, start):
        walls = []
        for text in messages:
            t = time.perf_counter()
            client.post(url, json={"messages": text}).raise_for_status()
            walls.append((time.perf_counter() - t) * 1000)
        q = statistics.quantiles(walls, n=20)
        return {"start_s": round(start, 1), "p50_ms": round(statistics.median(walls), 1), "p95_ms": round(q[18], 1),
                "rss_mb": round(rss_mb(pid))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="120,1000,10000")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            cards = tools(n)
            tools_file, data_dir = Path(tmp) / f"scale_{n}.json", Path(tmp) / f"data_{n}"
            tools_file.write_text(json.dumps({"tools": cards}))
            messages = asks(cards, args.requests)
            cold, warm = serve(tools_file, data_dir, messages), serve(tools_file, data_dir, messages)
            out[n] = {"cold": cold, "warm": warm}
            if not args.json:
                print(f"{n:>6} tools  start cold {cold['start_s']:6.1f} s  warm {warm['start_s']:6.1f} s  "
                      f"route p50 {warm['p50_ms']:6.1f} ms  p95 {warm['p95_ms']:6.1f} ms  memory {warm['rss_mb']} MB",
                      flush=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
