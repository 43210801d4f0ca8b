"""Per-category success, configurations side by side (the layout of paper Tables 1 and 2).

Columns are `<benchmark>:<category>` cells plus one `<benchmark>:all` cell per benchmark:
- GAIA: the task level (`level1` … `level3`); `gaia:all` is weighted by task count across levels,
  as the paper computes GAIA's overall success.
- GAIA2: the scenario category (execution, search, adaptability, time, …); `gaia2:all` is over tasks.
- SWE-bench (and any other benchmark): one `all` cell (the paper reports SWE-bench as one number;
  the per-repository split stays in the task records).
Rows are configurations (one RUN_DIR each), so several configurations read side by side.
"""

from __future__ import annotations

from typing import Any

from .episodes import Episode

BENCH_NAMES = {"gaia": "gaia", "gaia2": "gaia2", "swebench": "swebench"}
PER_CATEGORY = ("gaia", "gaia2")  # benchmarks whose categories are table columns


def category_cells(ep: Episode) -> list[str]:
    """The table cells one episode counts in."""
    bench = str(ep.config.get("env") or "?")
    cells = [f"{bench}:all"]
    cat = ep.task.get("category")
    if bench in PER_CATEGORY and cat:
        cells.insert(0, f"{bench}:{str(cat).lower()}")
    return cells


def exact_success(ep: Episode) -> bool | None:
    """GAIA with a counted LLM fallback: the episode's quasi-exact-match result; else None."""
    d = (ep.end or {}).get("check_details") or {}
    return bool(d["exact_match"]) if d.get("fallback_counted") and "exact_match" in d else None


def by_category(groups: dict[str, list[Episode]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{config label: {cell: {n, success}}} over scored episodes. Where GAIA's LLM fallback counted
    in success, a `<bench>:all (exact)` cell gives the exact-match-only rate beside it (both ways)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, eps in groups.items():
        cells: dict[str, list[bool]] = {}
        for ep in eps:
            if ep.success is None:
                continue
            for c in category_cells(ep):
                cells.setdefault(c, []).append(bool(ep.success))
            exact = exact_success(ep)
            if exact is not None:
                cells.setdefault(f"{ep.config.get('env') or '?'}:all (exact)", []).append(exact)
        out[label] = {c: {"n": len(v), "success": round(sum(v) / len(v), 4)} for c, v in cells.items()}
    return out


def column_order(table: dict[str, dict[str, Any]]) -> list[str]:
    """Benchmarks in paper order (GAIA, GAIA2, SWE-bench, others), categories sorted, `all` last."""
    names = {c for cells in table.values() for c in cells}
    rank = {b: i for i, b in enumerate(("gaia", "gaia2", "swebench"))}

    def key(c: str) -> tuple[int, str, int, str]:
        bench, _, cat = c.partition(":")
        return rank.get(bench, 9), bench, 1 if cat.startswith("all") else 0, cat
    return sorted(names, key=key)


def side_by_side(table: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Header + rows of success rates (None where a configuration has no task in a cell)."""
    cols = column_order(table)
    return {"columns": cols,
            "rows": [{"label": label, "cells": [cells.get(c, {}).get("success") for c in cols],
                      "n": [cells.get(c, {}).get("n", 0) for c in cols]} for label, cells in table.items()]}
