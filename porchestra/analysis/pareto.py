"""Success vs cost across configurations with bootstrap confidence intervals, and the Pareto front
(no other configuration is at least as successful and at most as costly, one strictly better)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .episodes import Episode


def bootstrap_ci(values: list[float], n: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(n, len(arr)))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def point(label: str, eps: list[Episode], seed: int = 0) -> dict[str, Any]:
    scored = [ep for ep in eps if ep.success is not None]
    succ = [1.0 if ep.success else 0.0 for ep in scored]
    costs = [ep.totals.get("cost_usd") for ep in eps if ep.end is not None]
    known = [c for c in costs if c is not None]
    cost = float(np.mean(known)) if known and len(known) == len(costs) else None
    return {"label": label, "n": len(scored), "success": float(np.mean(succ)) if succ else None,
            "success_ci": bootstrap_ci(succ, seed=seed), "cost": cost,
            "cost_ci": bootstrap_ci(known, seed=seed) if cost is not None else None}


def pareto_front(points: list[dict[str, Any]]) -> list[str]:
    ok = [p for p in points if p["success"] is not None and p["cost"] is not None]
    front = []
    for p in ok:
        dominated = any(q["success"] >= p["success"] and q["cost"] <= p["cost"]
                        and (q["success"] > p["success"] or q["cost"] < p["cost"]) for q in ok)
        if not dominated:
            front.append(p["label"])
    return front


def pareto(groups: dict[str, list[Episode]], seed: int = 0) -> dict[str, Any]:
    pts = [point(label, eps, seed) for label, eps in groups.items()]
    front = set(pareto_front(pts))
    for p in pts:
        p["on_front"] = p["label"] in front
    return {"points": pts, "front": sorted(front)}
