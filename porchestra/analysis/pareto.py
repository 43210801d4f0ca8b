"""Success vs cost across configurations with bootstrap confidence intervals, and the Pareto front
(no other configuration is at least as successful and at most as costly, one strictly better)."""

from __future__ import annotations

import random
from statistics import fmean
from typing import Any

from .episodes import Episode


def _quantile(sorted_xs: list[float], q: float) -> float:
    pos = q * (len(sorted_xs) - 1)  # linear interpolation between closest ranks
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def bootstrap_ci(values: list[float], n: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (seeded, stdlib only)."""
    if not values:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    k = len(values)
    means = sorted(fmean(rng.choices(values, k=k)) for _ in range(n))
    a = (1 - level) / 2
    return _quantile(means, a), _quantile(means, 1 - a)


def point(label: str, eps: list[Episode], seed: int = 0) -> dict[str, Any]:
    scored = [ep for ep in eps if ep.success is not None]
    succ = [1.0 if ep.success else 0.0 for ep in scored]
    costs = [ep.totals.get("cost_usd") for ep in eps if ep.end is not None]
    known = [c for c in costs if c is not None]
    cost = fmean(known) if known and len(known) == len(costs) else None
    return {"label": label, "n": len(scored), "success": fmean(succ) if succ else None,
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
