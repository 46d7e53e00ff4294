"""The rows of docs/results.md's accuracy floor: which cases route over which cards, and one row's figures.

Three kinds of row, with bare cards routed bare (or, `enriched`, with their cached generated texts): `packs`
routes the cases over the configured packs (their written cards); `bare` over the row's tools alone; `served`
over the packs plus the row's tools, as `FUNES_TOOLS_FILES` serves them. Run by `bench/rows.py` and checked by
`tests/test_accuracy_floor.py`.
"""
from __future__ import annotations

from pathlib import Path

import config
from funes.build import build
from funes.eval.scoring import load_cases, measure_cases, score
from funes.tools.loaders import load_file
from funes.tools.registry import Registry

BENCH = Path(__file__).resolve().parents[2] / "bench"
SEED, SEED_TOOLS = "{eval}/seed_dev.jsonl", "{eval}/seed_tools.jsonl"
# (row, kind, cases, tools)
ROWS = (("seed_dev packs", "packs", SEED, None),
        ("probe_cases packs", "packs", "probe_cases.jsonl", None),
        ("closings packs", "packs", "probe_closing_cases.jsonl", None),
        ("seed_dev bare", "bare", SEED, SEED_TOOLS),
        ("probe_cases bare", "bare", "probe_cases.jsonl", SEED_TOOLS),
        ("domains bare", "bare", "probe_domains_cases.jsonl", "probe_domains_tools.jsonl"),
        ("domains2 bare", "bare", "probe_domains2_cases.jsonl", "probe_domains2_tools.jsonl"),
        ("domains3 bare", "bare", "probe_domains3_cases.jsonl", "probe_domains3_tools.jsonl"),
        ("gate bare", "bare", "probe_gate_cases.jsonl", "probe_gate_tools.jsonl"),
        ("mcp bare", "bare", "probe_mcp_cases.jsonl", "mcp_servers_tools.json"),
        ("multilingual bare", "bare", "probe_multilingual_cases.jsonl", "probe_domains3_tools.jsonl"),
        ("multilingual2 bare", "bare", "probe_multilingual2_cases.jsonl", "probe_multilingual2_tools.jsonl"),
        ("values bare", "bare", "probe_values_cases.jsonl", "probe_values_tools.jsonl"),
        ("mixed served", "served", "probe_mixed_cases.jsonl", "probe_mixed_tools.jsonl"),
        ("mixed2 served", "served", "probe_mixed2_cases.jsonl", "probe_mixed2_tools.jsonl"),
        ("domains served", "served", "probe_domains_cases.jsonl", "probe_domains_tools.jsonl"),
        ("mcp served", "served", "probe_mcp_cases.jsonl", "mcp_servers_tools.json"),
        ("mcp2 bare", "bare", "probe_mcp2_cases.jsonl", "probe_mcp2_tools.json"),
        ("mcp2 served", "served", "probe_mcp2_cases.jsonl", "probe_mcp2_tools.json"))


class NotEnriched(Exception):
    """A row routed enriched whose cards the enrichment cache does not all hold."""


def path(template: str, eval_dir: str) -> str:
    """A row's file: under the eval directory, or in bench/."""
    return template.format(eval=eval_dir) if "{eval}" in template else str(BENCH / template)


def parts_for(settings: dict | None = None, enriched: bool = False):
    """Funes' parts over the configured (or given) settings: bare cards routed bare, or with the generated texts
    DATA_DIR's enrichment cache holds (`enriched`; nothing is enriched here, `funes cards enrich` does that)."""
    return build(config.load({**(settings or {}), "ENRICH": "on" if enriched else "off"}))


def measure(parts, kind: str, cases_file: str, tools_file: str | None) -> dict:
    """One row's figures."""
    report = score(measure_cases(parts.factory, load_cases(cases_file), registry_for(parts, kind, tools_file)))
    return {"n": report["n"], "lenient": report["lenient_accuracy"], "first": report["recall_at"].get("1") or 0.0,
            "recall5": report["recall_at"].get("5") or 0.0, "no_tool_f1": report["no_tool"]["f1"]}


def registry_for(parts, kind: str, tools_file: str | None):
    """The cards a row routes over."""
    if kind == "packs":
        return parts.registry
    tools = load_file(tools_file)
    registry = Registry([*parts.registry, *tools]) if kind == "served" else tools
    if not parts.enrichment.ready(registry):  # ENRICH=off is always ready: its cards stay bare
        raise NotEnriched(f"{tools_file}: some bare cards are not enriched yet; run `scripts/funes cards enrich` on it")
    return parts.enrichment.apply(registry)


def shortlisted(parts, kind: str, cases_file: str, tools_file: str | None, k: int,
                unsure: float | None = None) -> dict:
    """A row answered with shortlists of at most `k`: how often a right tool is in it (cases needing one), or
    named beside an empty one (its `closest`), its size there (median, mean), and how often a no-tool case gets
    no tool. `unsure`: where the router chose no tool, the likely cards are offered all the same when P(needs
    a tool) reaches it (measured, not served)."""
    from funes.selection.shortlist import shortlist, widen

    hits, named, sizes, empty, no_tool = 0, 0, [], 0, 0
    for m in measure_cases(parts.factory, load_cases(cases_file), registry_for(parts, kind, tools_file)):
        decision = m.router.decide(m.evidence)
        answer = shortlist(decision, k, parts.settings)
        listed = set(answer.tools)
        if not listed and unsure is not None and _need(decision) >= unsure:
            listed = set(widen(decision, [], k, parts.settings["SHORTLIST_COVERAGE"])[0])
        if m.case.expected:
            hits += bool(listed & m.case.acceptable)
            named += bool((listed or set(answer.closest)) & m.case.acceptable)
            sizes.append(len(listed))
        else:
            no_tool += 1
            empty += not listed - m.case.acceptable
    sizes.sort()
    return {"n": len(sizes) + no_tool, "right_in": round(hits / max(len(sizes), 1), 4),
            "right_or_named": round(named / max(len(sizes), 1), 4),
            "median": sizes[len(sizes) // 2] if sizes else 0, "mean": round(sum(sizes) / max(len(sizes), 1), 2),
            "no_tool_empty": round(empty / max(no_tool, 1), 4)}


def _need(decision) -> float:
    """P(the message needs a tool): the gate's over bare cards, else 1 - the classifier's P(no tool)."""
    if decision.need_probability is not None:
        return decision.need_probability
    return 1.0 - decision.no_tool_probability if decision.no_tool_probability is not None else 0.0
