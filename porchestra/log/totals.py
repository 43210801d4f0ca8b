"""Per-task totals derived from the events (docs/events.md, `task_end.totals`).

Cost is split into routine orchestration, proactive communication and worker execution (paper
Table 3); judge, user-simulator and attribution calls are reported beside them, never inside. A
total is None as soon as one call in it has an unknown price (a partial sum would understate it);
`cost_usd_known` and `unpriced_calls` say how much is known.
"""

from __future__ import annotations

from typing import Any

AGENT_COMPONENTS = ("orchestration", "communication", "execution")


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def compute_totals(events: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [e for e in events if e.get("event") == "llm_call"]
    by_component: dict[str, float | None] = {c: 0.0 for c in AGENT_COMPONENTS}
    other: dict[str, float | None] = {}
    tokens = {"input": 0, "output": 0, "cached_input": 0}
    known = 0.0
    unpriced = 0
    for e in calls:
        usage = e.get("usage") or {}
        for k in tokens:
            tokens[k] += int(usage.get(k) or 0)
        cost = e.get("cost_usd")
        if cost is None:
            unpriced += 1
        else:
            known += cost
        comp = e.get("component") or "other"
        bucket = by_component if comp in AGENT_COMPONENTS else other
        bucket[comp] = _add(bucket.get(comp, 0.0), cost)
    agent_total: float | None = 0.0
    for c in AGENT_COMPONENTS:
        agent_total = _add(agent_total, by_component[c])
    steps = max((e.get("step", 0) for e in events), default=0)
    return {
        "steps": steps,
        "workers": sum(1 for e in events if e.get("event") == "delegate"),
        "llm_calls": len(calls),
        "tokens": tokens,
        "cost_usd": agent_total,
        "cost_by_component": by_component,
        "cost_other": other,
        "cost_usd_known": round(known, 10),
        "unpriced_calls": unpriced,
        "format_errors": sum(1 for e in events if e.get("event") == "format_error"),
        "revisions": sum(1 for e in events if e.get("event") == "revise"),
        "reports": sum(1 for e in events if e.get("event") == "report"),
        "tool_calls": sum(1 for e in events if e.get("event") == "tool_call"),
    }
