"""Plain-text renderings of evaluation and calibration results for the terminal."""
from __future__ import annotations

from typing import Any


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def format_report(r: dict[str, Any]) -> str:
    """The eval metrics, then a per-tag table."""
    lines = [
        f"cases              {r['n']}",
        f"strict accuracy    {_fmt(r['strict_accuracy'])}",
        f"lenient accuracy   {_fmt(r['lenient_accuracy'])}",
        "no-tool            precision {precision:.3f}  recall {recall:.3f}  f1 {f1:.3f}".format(**r["no_tool"]),
        "recall@k           " + "  ".join(f"@{k} {_fmt(v)}" for k, v in r["recall_at"].items()),
        f"route latency ms   p50 {_fmt(r['latency_ms']['p50'])}  p95 {_fmt(r['latency_ms']['p95'])}",
        "",
        f"{'tag':<22}{'n':>6}  lenient",
    ]
    lines += [f"{tag:<22}{v['n']:>6}  {v['lenient_accuracy']:.3f}" for tag, v in r["by_tag"].items()]
    return "\n".join(lines)


def format_calibration(c, out_file: str) -> str:
    """Before/after on the fitted and the held-out cases, and the settings written."""
    rows = [("fit", c.n_fit, c.fit_before, c.fit_after), ("held-out", c.n_holdout, c.holdout_before, c.holdout_after)]
    lines = [f"{'split':<10}{'n':>6}  {'lenient before':>15}{'after':>8}  {'no-tool F1 before':>18}{'after':>8}"]
    for name, n, before, after in rows:
        if before:
            lines.append(f"{name:<10}{n:>6}  {before['lenient_accuracy']:>15.3f}{after['lenient_accuracy']:>8.3f}"
                         f"  {before['no_tool']['f1']:>18.3f}{after['no_tool']['f1']:>8.3f}")
    lines.append("")
    lines += [f"{k} = {v}" for k, v in sorted(c.settings.items())]
    lines.append(f"written to {out_file}")
    return "\n".join(lines)
