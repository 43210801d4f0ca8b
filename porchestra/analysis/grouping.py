"""Task length and dynamicity groups (paper Obs. 7).

Length: for each task solved by at least one configuration, the fewest environment actions (tool
calls that reached the environment) among its successful trajectories, over *all* runs given;
tasks are binned by that number. Dynamicity (GAIA2): the number of future exogenous events in
`task.metadata["future_events"]` (an int or a list of events).
"""

from __future__ import annotations

from typing import Any

from .episodes import Episode

DEFAULT_BINS = (5, 10, 20, 40)  # upper edges: 1-5, 6-10, 11-20, 21-40, >40


def task_lengths(episodes: list[Episode]) -> dict[str, int]:
    best: dict[str, int] = {}
    for ep in episodes:
        if ep.success:
            n = ep.env_actions()
            best[ep.task_id] = min(n, best.get(ep.task_id, n))
    return best


def length_bin(n: int, bins: tuple[int, ...] = DEFAULT_BINS) -> str:
    lo = 0
    for edge in bins:
        if n <= edge:
            return f"{lo + 1}-{edge}" if lo + 1 != edge else str(edge)
        lo = edge
    return f">{bins[-1]}"


def future_events(ep: Episode) -> int | None:
    v = ep.metadata.get("future_events")
    if v is None:
        return None
    return len(v) if isinstance(v, (list, tuple)) else int(v)


def success_by_group(groups: dict[str, list[Episode]], key) -> dict[str, dict[str, Any]]:
    """{config label: {group: {n, success}}} for a grouping function key(ep) → group or None."""
    out: dict[str, dict[str, Any]] = {}
    for label, eps in groups.items():
        cells: dict[str, list[bool]] = {}
        for ep in eps:
            g = key(ep)
            if g is None or ep.success is None:
                continue
            cells.setdefault(str(g), []).append(bool(ep.success))
        out[label] = {g: {"n": len(v), "success": round(sum(v) / len(v), 4)} for g, v in cells.items()}
    return out


def group_order(names: set[str]) -> list[str]:
    def k(name: str) -> tuple[int, str]:
        digits = "".join(c if c.isdigit() else " " for c in name).split()
        return (int(digits[0]) + (1 if name.startswith(">") else 0) if digits else 10**9, name)
    return sorted(names, key=k)


def by_length(all_episodes: list[Episode], groups: dict[str, list[Episode]],
              bins: tuple[int, ...] = DEFAULT_BINS) -> dict[str, dict[str, Any]]:
    lengths = task_lengths(all_episodes)
    return success_by_group(groups, lambda ep: length_bin(lengths[ep.task_id], bins) if ep.task_id in lengths else None)


def by_dynamicity(groups: dict[str, list[Episode]]) -> dict[str, dict[str, Any]]:
    return success_by_group(groups, future_events)
