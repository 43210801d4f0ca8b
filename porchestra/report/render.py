"""The report as rich tables (console) and Markdown; the same rows for both."""

from __future__ import annotations

from typing import Any

from ..analysis.breakdown import column_order
from ..analysis.grouping import group_order
from . import fmt


def _f(v: Any, pct: bool = False, money: bool = False) -> str:
    if v is None:
        return fmt.MISSING
    return fmt.pct(v) if pct else fmt.money(v) if money else fmt.num(v)


def tables(report: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for every section that has content."""
    out = []
    rows = []
    for c in report["configs"]:
        k = c["cost"]
        rows.append([c["label"], c["mode"], str(c["episodes"]), str(c.get("scored", "–")), str(c.get("infra_errors", 0)),
                     _f(c["success"], pct=True), _f(c["steps"]),
                     _f(c["revisions"]), _f(k["orchestration"], money=True), _f(k["communication"], money=True),
                     _f(k["execution"], money=True), _f(k["total"], money=True),
                     ", ".join(f"{n} {_f(v, money=True)}" for n, v in k["other"].items()) or "–"])
    out.append(("Configurations (mean per task; success over scored tasks)", ["config", "mode", "n", "scored",
                "infra", "success", "steps", "revs",
                "orch $", "comm $", "exec $", "total $", "other $"], rows))
    if report["ablations"]:
        out.append(("Ablations (one dimension or field off)", ["config", "ablated", "success", "full", "Δ"],
                    [[a["label"], ", ".join(a["ablated"]), _f(a["success"], pct=True),
                      _f(a["full_success"], pct=True), _f(a["delta"] and 100 * a["delta"]) + (" pt" if a["delta"] is not None else "")]
                     for a in report["ablations"]]))
    if report["recovery"]:
        out.append(("Controlled intervention (faults)", ["config", "clean", "hit", "eligible", "recovery",
                    "delay→intervention", "delay→recovery", "tokens→recovery", "cost→recovery"],
                    [[r["label"], r["clean"] or "–", str(r["hit"]), str(r["eligible"]), _f(r["recovery_rate"], pct=True),
                      _f(r["mean_intervention_delay_steps"]), _f(r["mean_recovery_delay_steps"]),
                      _f(r["mean_recovery_tokens"]), _f(r["mean_recovery_cost"], money=True)]
                     for r in report["recovery"]]))
    for key, title in (("by_category", "Success by benchmark category, configurations side by side (Tables 1/2)"),
                       ("by_length", "Success by task length (fewest env actions among successes)"),
                       ("by_dynamicity", "Success by number of future events")):
        table = report.get(key) or {}
        groups = (column_order(table) if key == "by_category"
                  else group_order({g for cells in table.values() for g in cells}))
        if groups:
            out.append((title, ["config"] + groups,
                        [[label] + [f"{_f(cells[g]['success'], pct=True)} (n={cells[g]['n']})" if g in cells else "–"
                                    for g in groups] for label, cells in table.items()]))
    pts = report["pareto"]["points"]
    out.append(("Success vs cost (95% bootstrap CI)", ["config", "success", "CI", "cost", "Pareto"],
                [[p["label"], _f(p["success"], pct=True),
                  f"{_f(p['success_ci'][0], pct=True)}–{_f(p['success_ci'][1], pct=True)}" if p["n"] else "–",
                  _f(p["cost"], money=True), "yes" if p["on_front"] else ""] for p in pts]))
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = ["# porchestra report", "", "Runs: " + ", ".join(f"`{d}`" for d in report["run_dirs"]), ""]
    for title, header, rows in tables(report):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def print_rich(report: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    from rich.markup import escape

    console = console or Console()
    for title, header, rows in tables(report):  # labels like `[gold]` are text, not rich markup
        t = Table(title=escape(title))
        for h in header:
            t.add_column(escape(h))
        for row in rows:
            t.add_row(*(escape(c) for c in row))
        console.print(t)
