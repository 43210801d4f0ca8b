"""Controlled intervention (paper RQ4, Fig. 3): recovery and response delay under injected faults.

Per faulted episode, from its event log:
- *first failure*: the first `fault` event with phase "hit" (a call the fault broke). No hit: the
  episode is excluded (the fault was never exercised).
- *intervention*: the first orchestrator action after it that changes something — a `delegate`, a
  `terminate` by the orchestrator, or a `revise` that changes the harness (a no-op polling revise
  is not an intervention).
- *first successful alternative action*: the first successful tool call after the failure that does
  not rely on the broken tool (revoke/rename: a tool other than the target; transient/schema: the
  target itself working again).
- *intervention delay* (paper RQ4, "mean delay of 1.67 steps"): the worker execution steps from the
  injected fault until the intervention takes effect — the worker tool turns (tool calls and malformed
  replies, the faulted call included; communication actions finish/revise/stop excluded) whose step
  lies in [failure step, intervention step). Orchestrator decisions are not worker steps, so a worker
  that reports right after the fault and is revised at once has delay 1; a trigger on the failed call
  also gives 1; polling every K steps gives up to K. `delay="global_steps"` restores the older
  definition (global step difference, decisions and reports included), which is always reported as
  `intervention_delay_global` / `mean_intervention_delay_global_steps`.
- recovery delay: global step difference from the failure to the first successful alternative
  action; tokens and cost: LLM calls after the failure up to and including the event.
- *recovered*: an alternative action happened and the task succeeded (success unknown → the
  alternative action alone).
Recovery rate = recovered / hit, over episodes whose clean twin (same task, no fault) succeeded, so a
task the system cannot solve anyway does not count as a failed recovery. Unrecovered episodes are
censored at their last step for the Kaplan–Meier curve of time to recovery.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import mean
from typing import Any

from .episodes import Episode


@dataclass
class FaultOutcome:
    task_id: str
    fault_id: str
    fault_type: str
    target: str
    failure_step: int
    intervention_step: int | None
    recovery_step: int | None
    last_step: int
    success: bool | None
    intervention_delay: int | None
    recovery_delay: int | None
    intervention_tokens: int | None
    recovery_tokens: int | None
    intervention_cost: float | None
    recovery_cost: float | None
    intervention_delay_global: int | None = None

    @property
    def recovered(self) -> bool:
        return self.recovery_step is not None and self.success is not False

    @property
    def time(self) -> int:
        """Time to recovery, or the censoring time (failure → end of the episode)."""
        return self.recovery_delay if self.recovered else max(self.last_step - self.failure_step, 0)


def _is_intervention(e: dict[str, Any]) -> bool:
    if e["event"] == "delegate":
        return True
    if e["event"] == "terminate":
        return e.get("by", "orchestrator") == "orchestrator"
    if e["event"] == "revise":
        if "harness_before" in e:
            return e["harness_before"] != e.get("harness")
        rev = e.get("revision") or {}
        return any(rev.get(k) not in (None, "", []) for k in ("context", "tools", "step_budget", "instruction",
                                                                "constraints")) or \
            (rev.get("executor") or {}).get("operation") == "replace"
    return False


def _spend(events: list[dict[str, Any]], i0: int, i1: int) -> tuple[int, float | None]:
    tokens, cost = 0, 0.0
    for e in events[i0 + 1:i1 + 1]:
        if e["event"] == "llm_call":
            u = e.get("usage") or {}
            tokens += int(u.get("input") or 0) + int(u.get("output") or 0)
            cost = None if cost is None or e.get("cost_usd") is None else cost + e["cost_usd"]
    return tokens, cost


COMM_ACTIONS = ("finish", "revise", "stop")
DELAY_UNITS = ("worker_steps", "global_steps")


def worker_tool_steps(events: list[dict[str, Any]], s0: int, s1: int) -> int:
    """Worker execution turns (not communication actions) with s0 <= step < s1."""
    return sum(1 for e in events if e["event"] == "llm_call" and e.get("role") == "worker"
               and s0 <= e.get("step", -1) < s1 and e.get("action") not in COMM_ACTIONS)


def fault_outcome(ep: Episode, delay: str = "worker_steps") -> FaultOutcome | None:
    if delay not in DELAY_UNITS:
        raise ValueError(f"unknown delay unit {delay!r}; known: {', '.join(DELAY_UNITS)}")
    ev = ep.events
    i0 = next((i for i, e in enumerate(ev) if e["event"] == "fault" and e.get("phase") == "hit"), None)
    if i0 is None:
        return None
    hit = ev[i0]
    target, ftype = hit.get("target"), hit.get("type")
    ii = next((i for i in range(i0 + 1, len(ev)) if _is_intervention(ev[i])), None)

    def alternative(e: dict[str, Any]) -> bool:
        if e["event"] != "tool_call" or not e.get("ok"):
            return False
        return e["tool"] != target if ftype in ("revoke", "rename") else e["tool"] == target

    ir = next((i for i in range(i0 + 1, len(ev)) if alternative(ev[i])), None)
    s0 = hit["step"]
    last = max(e.get("step", 0) for e in ev)
    it, ic = _spend(ev, i0, ii) if ii is not None else (None, None)
    rt, rc = _spend(ev, i0, ir) if ir is not None else (None, None)
    global_delay = ev[ii]["step"] - s0 if ii is not None else None
    worker_delay = worker_tool_steps(ev, s0, ev[ii]["step"]) if ii is not None else None
    return FaultOutcome(ep.task_id, hit.get("fault_id", "?"), ftype, target, s0,
                        ev[ii]["step"] if ii is not None else None, ev[ir]["step"] if ir is not None else None,
                        last, ep.success,
                        worker_delay if delay == "worker_steps" else global_delay,
                        ev[ir]["step"] - s0 if ir is not None else None, it, rt, ic, rc,
                        intervention_delay_global=global_delay)


def kaplan_meier(times: list[float], observed: list[bool]) -> list[tuple[float, float]]:
    """[(t, S(t))] at each time with an observed event; S is the probability of *not* yet being
    recovered after t. Censored times only shrink the risk set."""
    pairs = sorted(zip(times, observed))
    at_risk, surv, curve = len(pairs), 1.0, [(0.0, 1.0)]
    i = 0
    while i < len(pairs):
        t = pairs[i][0]
        same = [o for tt, o in pairs if tt == t]
        d = sum(same)
        if d and at_risk:
            surv *= 1 - d / at_risk
            curve.append((float(t), surv))
        at_risk -= len(same)
        i += len(same)
    return curve


def _mean(xs: list[Any]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(mean(xs), 4) if xs else None


def recovery_summary(faulted: list[Episode], clean: list[Episode] | None = None,
                     delay: str = "worker_steps") -> dict[str, Any]:
    """Recovery and delays for one faulted configuration, paired by task with its clean runs."""
    outcomes = [o for o in (fault_outcome(ep, delay) for ep in faulted) if o is not None]
    normalised = bool(clean)
    if clean:
        solved = {ep.task_id for ep in clean if ep.success}
        outcomes = [o for o in outcomes if o.task_id in solved]
    recovered = [o for o in outcomes if o.recovered]
    curve = kaplan_meier([o.time for o in outcomes], [o.recovered for o in outcomes])
    horizon = max((o.time for o in outcomes), default=0)
    if horizon > curve[-1][0]:  # carry the curve to the end of follow-up
        curve.append((float(horizon), curve[-1][1]))
    return {
        "episodes": len(faulted),
        "hit": sum(1 for ep in faulted if fault_outcome(ep) is not None),
        "eligible": len(outcomes),
        "normalised_by_clean": normalised,
        "recovered": len(recovered),
        "recovery_rate": round(len(recovered) / len(outcomes), 4) if outcomes else None,
        "intervened": sum(1 for o in outcomes if o.intervention_step is not None),
        "delay_unit": delay,
        "mean_intervention_delay_steps": _mean([o.intervention_delay for o in outcomes]),
        "mean_intervention_delay_global_steps": _mean([o.intervention_delay_global for o in outcomes]),
        "mean_recovery_delay_steps": _mean([o.recovery_delay for o in recovered]),
        "mean_intervention_tokens": _mean([o.intervention_tokens for o in outcomes]),
        "mean_recovery_tokens": _mean([o.recovery_tokens for o in recovered]),
        "mean_intervention_cost": _mean([o.intervention_cost for o in outcomes]),
        "mean_recovery_cost": _mean([o.recovery_cost for o in recovered]),
        "km_curve": [[t, round(1 - s, 4)] for t, s in curve],  # cumulative recovery by t steps
        "outcomes": [asdict(o) | {"recovered": o.recovered} for o in outcomes],
    }
