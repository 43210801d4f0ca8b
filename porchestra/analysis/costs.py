"""Per-task cost split (paper Table 3): routine orchestration, proactive communication, worker
execution — from `task_end.totals.cost_by_component` — with judge / user-simulator / attribution
cost (`totals.cost_other`) reported beside, never inside. A mean is None when any task's part is
unpriced (a partial sum would understate it)."""

from __future__ import annotations

from typing import Any

from ..log.totals import AGENT_COMPONENTS
from .episodes import Episode


def _mean_known(values: list[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def cost_split(episodes: list[Episode]) -> dict[str, Any]:
    eps = [ep for ep in episodes if ep.end is not None]
    row: dict[str, Any] = {"tasks": len(eps)}
    for comp in AGENT_COMPONENTS:
        row[comp] = _mean_known([(ep.totals.get("cost_by_component") or {}).get(comp, 0.0) for ep in eps])
    row["total"] = _mean_known([ep.totals.get("cost_usd") for ep in eps])
    other_keys = sorted({k for ep in eps for k in (ep.totals.get("cost_other") or {})})
    row["other"] = {k: _mean_known([(ep.totals.get("cost_other") or {}).get(k, 0.0) for ep in eps])
                    for k in other_keys}
    tokens = [ep.totals.get("tokens") or {} for ep in eps]
    row["tokens_in"] = sum(t.get("input", 0) for t in tokens) / len(eps) if eps else None
    row["tokens_out"] = sum(t.get("output", 0) for t in tokens) / len(eps) if eps else None
    row["unpriced_calls"] = sum(int(ep.totals.get("unpriced_calls") or 0) for ep in eps)
    return row
