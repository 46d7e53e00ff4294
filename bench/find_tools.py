"""`find_tools` as an MCP client meets it: a real `funes serve`, its tools beside the packs, asked over /mcp.

    .venv/bin/python bench/find_tools.py CASES TOOLS [--limit 5] [--json]

`funes serve` runs on an empty data dir with FUNES_TOOLS_FILES=[TOOLS] (cards bare, as before any enrichment)
beside the built-in packs, as bench/served.py starts it; the MCP SDK's client connects to its /mcp over
streamable HTTP and calls `find_tools` with each case's last user turn as the query (what a client that
searches for a tool sends). Of the cases that need a tool: how often a right tool is in the answer, or, where
the answer is empty, among the `closest` it names; the answer's size (median, mean). Of the no-tool cases:
how often nothing is answered.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from bench.scale import served  # noqa: E402
from funes.eval.scoring import load_cases  # noqa: E402


async def answers(url: str, queries: list[str], limit: int) -> list[dict]:
    """find_tools' structured answer to each query, in one client session."""
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        out = []
        for query in queries:
            result = await session.call_tool("find_tools", {"query": query, "limit": limit})
            if result.is_error:
                raise SystemExit(f"find_tools failed on {query!r}: {result.content[0].text}")
            out.append(result.structured_content)
        return out


def score(cases: list, found: list[dict]) -> dict:
    """The shortlist's figures over the cases (see the module's docstring)."""
    listed, named, sizes, empty, no_tool = 0, 0, [], 0, 0
    for case, answer in zip(cases, found):
        tools = {t["name"] for t in answer["tools"]}
        if case.expected:
            listed += bool(tools & case.acceptable)
            named += bool((tools or set(answer.get("closest", []))) & case.acceptable)
            sizes.append(len(tools))
        else:
            no_tool += 1
            empty += not tools - case.acceptable
    need = max(len(sizes), 1)
    return {"n": len(cases), "right_listed": round(listed / need, 4), "right_or_named": round(named / need, 4),
            "median_tools": statistics.median(sizes) if sizes else 0, "mean_tools": round(sum(sizes) / need, 2),
            "no_tool_empty": round(empty / max(no_tool, 1), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases")
    ap.add_argument("tools")
    ap.add_argument("--limit", type=int, default=5, help="find_tools' limit (most tools an answer)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = load_cases(args.cases)
    queries = [[m["content"] for m in c.messages if m["role"] == "user"][-1] for c in cases]
    with tempfile.TemporaryDirectory() as tmp:
        with served(Path(args.tools).resolve(), Path(tmp), cases[0].messages) as (_, url, _, start):
            found = anyio.run(answers, url.rsplit("/", 1)[0] + "/mcp", queries, args.limit)
    report = score(cases, found) | {"start_s": round(start, 1)}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{Path(args.cases).name}: n={report['n']}  a right tool listed {report['right_listed']:.3f} "
          f"(or named beside none {report['right_or_named']:.3f})  tools median {report['median_tools']} "
          f"mean {report['mean_tools']:.2f}  no-tool cases answered none {report['no_tool_empty']:.3f}")


if __name__ == "__main__":
    main()
