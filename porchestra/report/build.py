"""The report as one JSON-able dict; everything printed, written or plotted comes from here.

Sections: `configs` (success, steps, cost split per configuration = per RUN_DIR), `ablations` (each
ablated configuration beside the full one of the same mode), `recovery` (each faulted configuration
paired with the clean one of the same mode), `by_length` / `by_dynamicity` (Obs. 7), `pareto`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.breakdown import by_category
from ..analysis.costs import cost_split
from ..analysis.episodes import Episode, by_label, load_run
from ..analysis.grouping import by_dynamicity, by_length, future_events
from ..analysis.pareto import pareto
from ..analysis.recovery import recovery_summary


def _infra(ep: Episode) -> bool:
    """The episode ended on an infrastructure error (model API, checker): not scored."""
    end = ep.end or {}
    return bool(end.get("infra_error")) or str(end.get("reason") or "").startswith(("model_error", "internal_error"))


def _rate(eps: list[Episode]) -> float | None:
    scored = [ep for ep in eps if ep.success is not None and not _infra(ep)]
    return round(sum(1 for ep in scored if ep.success) / len(scored), 4) if scored else None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 3) if xs else None


def config_row(label: str, eps: list[Episode]) -> dict[str, Any]:
    first = eps[0]
    return {"label": label, "mode": first.mode, "ablate": first.ablate, "faults": first.faults,
            "episodes": len(eps), "scored": sum(1 for ep in eps if ep.success is not None and not _infra(ep)),
            "infra_errors": sum(1 for ep in eps if _infra(ep)),
            "success": _rate(eps),
            "steps": _mean([ep.totals.get("steps", 0) for ep in eps]),
            "workers": _mean([ep.totals.get("workers", 0) for ep in eps]),
            "revisions": _mean([ep.totals.get("revisions", 0) for ep in eps]),
            "env_actions": _mean([ep.env_actions() for ep in eps]),
            "cost": cost_split(eps)}


def _signature(eps: list[Episode]) -> tuple[str, tuple[str, ...], bool]:
    ep = eps[0]
    return ep.mode, tuple(sorted(ep.ablate)), bool(ep.faults)


def _find(groups: dict[str, list[Episode]], mode: str, ablate: tuple[str, ...], faults: bool) -> str | None:
    for label, eps in groups.items():
        if _signature(eps) == (mode, ablate, faults):
            return label
    return None


def _describe(ep: Episode) -> str:
    parts = [ep.mode] + [f"-{a}" for a in sorted(ep.ablate)]
    if ep.faults:
        parts.append("+faults")
    return "".join(parts)


def build_report(run_dirs: list[str | Path], labels: list[str] | None = None, seed: int = 0) -> dict[str, Any]:
    episodes: list[Episode] = []
    for i, d in enumerate(run_dirs):
        eps = load_run(d, labels[i] if labels and i < len(labels) else None)
        if len({_describe(ep) for ep in eps}) > 1:  # one directory, several configurations: split
            for ep in eps:
                ep.label = f"{ep.label}[{_describe(ep)}]"
        episodes += eps
    groups = by_label(episodes)
    configs = [config_row(label, eps) for label, eps in groups.items()]
    ablations = []
    for label, eps in groups.items():
        mode, ablate, faulted = _signature(eps)
        if ablate and not faulted:
            full = _find(groups, mode, (), False)
            s, base = _rate(eps), _rate(groups[full]) if full else None
            ablations.append({"label": label, "mode": mode, "ablated": list(ablate), "success": s, "full": full,
                              "full_success": base,
                              "delta": round(s - base, 4) if s is not None and base is not None else None})
    recovery = []
    for label, eps in groups.items():
        mode, ablate, faulted = _signature(eps)
        if faulted:
            clean = _find(groups, mode, ablate, False)
            summary = recovery_summary(eps, groups[clean] if clean else None)
            recovery.append({"label": label, "mode": mode, "clean": clean, **summary})
    dyn = by_dynamicity(groups) if any(future_events(ep) is not None for ep in episodes) else {}
    return {"run_dirs": [str(d) for d in run_dirs], "configs": configs, "ablations": ablations,
            "recovery": recovery, "by_category": by_category(groups),
            "by_length": by_length(episodes, groups), "by_dynamicity": dyn,
            "pareto": pareto(groups, seed)}
