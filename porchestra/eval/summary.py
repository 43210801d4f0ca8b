"""Summary of an eval: success overall and per category, cost split, tokens, steps.

The success rate is over *scored* rows only: a row that ended on an infrastructure error (the model
API failed after retries, a checker crashed: `infra_error`, `success: null`) is counted apart and is
in neither the numerator nor the denominator."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _sum_known(xs: list[Any]) -> float | None:
    return None if any(x is None for x in xs) else float(sum(xs))


def _scored(r: dict[str, Any]) -> bool:
    return r.get("success") is not None and not r.get("infra_error")


def infra_reasons(rows: list[dict[str, Any]], limit: int = 200) -> dict[str, int]:
    """Why rows are infrastructure errors, most frequent first: reason text (cut to `limit` characters)
    → number of rows, so a summary says *what* failed (a dead endpoint, a missing module, …)."""
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.get("infra_error"):
            counts[" ".join(str(r.get("reason") or "unknown").split())[:limit]] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if _scored(r)]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r.get("category") or "all"].append(r)

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        sc = [r for r in rs if _scored(r)]
        comp: dict[str, float | None] = {}
        for key in ("orchestration", "communication", "execution"):
            comp[key] = _sum_known([(r.get("cost_by_component") or {}).get(key, 0.0) for r in rs])
        return {
            "tasks": len(rs),
            "scored": len(sc),
            "success_rate": _mean([1.0 if r["success"] else 0.0 for r in sc]),
            "infra_errors": sum(1 for r in rs if r.get("infra_error")),
            "cost_usd": _sum_known([r.get("cost_usd") for r in rs]),
            "cost_by_component": comp,
            "tokens_input": sum((r.get("tokens") or {}).get("input", 0) for r in rs),
            "tokens_output": sum((r.get("tokens") or {}).get("output", 0) for r in rs),
            "mean_steps": _mean([float(r.get("steps") or 0) for r in rs]),
        }

    return {"overall": block(rows), "by_category": {k: block(v) for k, v in sorted(groups.items())},
            "scored": len(scored), "infra_reasons": infra_reasons(rows)}


def _fmt(v: Any, money: bool = False) -> str:
    from ..report import fmt  # one number format for every table

    return fmt.money(v) if money else fmt.num(v)


def _pct(v: float | None) -> str:
    from ..report import fmt

    return fmt.pct(v)


def summary_table(summary: dict[str, Any], title: str = "eval summary") -> Table:
    t = Table(title=escape(title))
    t.add_column("category", no_wrap=True)
    for col in ("n", "scored", "success", "infra", "cost", "orch / comm / exec", "tokens in/out", "steps"):
        t.add_column(col, no_wrap=True)
    rows = [("overall", summary["overall"])] + list(summary["by_category"].items())
    for name, b in rows:
        c = b["cost_by_component"]
        rate = _pct(b["success_rate"])
        split = " / ".join(_fmt(c[k], True) for k in ("orchestration", "communication", "execution"))
        t.add_row(escape(name), str(b["tasks"]), str(b["scored"]), rate, str(b["infra_errors"]), _fmt(b["cost_usd"], True), split,
                  f"{b['tokens_input']}/{b['tokens_output']}", _fmt(b["mean_steps"]))
    return t


def to_markdown(summary: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", "", "Success is over scored tasks; infra errors (model API or checker failures) are "
             "excluded from it.", "", "| category | tasks | scored | success | infra errors | cost (USD) | "
             "orchestration | communication | execution | tokens in/out | mean steps |", "|" + "---|" * 11]
    for name, b in [("overall", summary["overall"])] + list(summary["by_category"].items()):
        c = b["cost_by_component"]
        rate = _pct(b["success_rate"])
        lines.append(f"| {name} | {b['tasks']} | {b['scored']} | {rate} | {b['infra_errors']} | {_fmt(b['cost_usd'], True)} | "
                     f"{_fmt(c['orchestration'], True)} | {_fmt(c['communication'], True)} | "
                     f"{_fmt(c['execution'], True)} | {b['tokens_input']}/{b['tokens_output']} | "
                     f"{_fmt(b['mean_steps'])} |")
    reasons = summary.get("infra_reasons") or {}
    if reasons:
        lines += ["", "Infrastructure errors (rerun the eval to retry them; `--keep-infra` keeps them):", "",
                  "| rows | reason |", "|---|---|"]
        lines += [f"| {n} | {_md_cell(why)} |" for why, n in reasons.items()]
    return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def write_summary(out: Path, rows: list[dict[str, Any]], title: str, console: Console | None = None) -> dict[str, Any]:
    s = summarize(rows)
    (out / "summary.json").write_text(json.dumps(s, indent=2))
    (out / "summary.md").write_text(to_markdown(s, title))
    if console is not None:
        console.print(summary_table(s, title))
        for why, n in s["infra_reasons"].items():
            console.print(f"infra error ×{n}: {why}", markup=False, highlight=False)
    return s
