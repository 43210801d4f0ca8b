"""Event log → ATIF (Agent Trajectory Interchange Format, v1.7) trajectories.

The orchestrator is the root trajectory: the task is its user step, each orchestrator LLM call an
agent step whose action (delegate_task, revise_task, complete, …) is a tool call with the decision's
params. Workers are first-class embedded subagent trajectories (v1.7): the root's
`subagent_trajectories` holds one per worker, each with its own `trajectory_id`, and a delegation's
observation result carries a `subagent_trajectory_ref` whose `trajectory_id` resolves to it
(`session_id` is the run's, informational as the spec says). A worker's
trajectory starts with its harness as the user step; each worker LLM call is an agent step whose tool
call is the tool action or the communication (finish / revise / stop) and whose observation is the
tool output; a revision from the orchestrator is a user step of that worker. Faults and format errors
are kept in step `extra`.
"""

from __future__ import annotations

import json
from typing import Any

from ..cli_support import version
from ..parsing import FormatError, extract_action_object

SCHEMA_VERSION = "ATIF-v1.7"


def _decision(text: str | None) -> dict[str, Any] | None:
    try:
        return extract_action_object(text or "")
    except FormatError:
        return None


def _metrics(e: dict[str, Any]) -> dict[str, Any]:
    u = e.get("usage") or {}
    m: dict[str, Any] = {"prompt_tokens": int(u.get("input") or 0), "completion_tokens": int(u.get("output") or 0)}
    if u.get("cached_input") is not None:
        m["cached_tokens"] = int(u["cached_input"])
    if e.get("cost_usd") is not None:
        m["cost_usd"] = e["cost_usd"]
    if e.get("component"):
        m["extra"] = {"component": e["component"]}
    return m


def _final(steps: list[dict[str, Any]]) -> dict[str, Any]:
    ms = [s["metrics"] for s in steps if "metrics" in s]
    costs = [m.get("cost_usd") for m in ms]
    return {"total_prompt_tokens": sum(m["prompt_tokens"] for m in ms),
            "total_completion_tokens": sum(m["completion_tokens"] for m in ms),
            "total_cached_tokens": sum(m.get("cached_tokens", 0) for m in ms),
            "total_cost_usd": None if any(c is None for c in costs) else round(sum(costs), 10),
            "total_steps": len(steps)}


class _Traj:
    def __init__(self, session_id: str, trajectory_id: str, name: str, model: str | None, extra: dict[str, Any]):
        self.trajectory_id = trajectory_id
        self.doc = {"schema_version": SCHEMA_VERSION, "session_id": session_id, "trajectory_id": trajectory_id,
                    "agent": {"name": name, "version": version(), "model_name": model, "extra": extra}, "steps": []}

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.doc["steps"]

    def add(self, source: str, message: str, ts: str, **kw: Any) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, "timestamp": ts, "source": source, "message": message,
                **{k: v for k, v in kw.items() if v not in (None, {}, [])}}
        self.steps.append(step)
        return step

    def finish(self) -> dict[str, Any]:
        self.doc["final_metrics"] = _final(self.steps)
        return self.doc


def to_atif(events: list[dict[str, Any]]) -> dict[str, Any]:
    start = next((e for e in events if e["event"] == "task_start"), {})
    cfg = start.get("config") or {}
    run_id = start.get("run_id") or (events[0]["run_id"] if events else "run")
    root = _Traj(run_id, run_id, "porchestra-orchestrator", cfg.get("orchestrator_model"),
                 {"mode": cfg.get("mode"), "task_id": start.get("task_id")})
    root.add("user", (start.get("task") or {}).get("instruction", ""), start.get("ts", ""))
    workers: dict[str, _Traj] = {}
    order: list[str] = []
    last_orch: dict[str, Any] | None = None
    for e in events:
        kind, agent = e["event"], e.get("agent_id", "")
        if kind == "llm_call" and e.get("role") == "orchestrator":
            d = _decision(e.get("response"))
            call = None if d is None else {"tool_call_id": f"orchestrator-s{e['step']}", "function_name": d.get("action"),
                                            "arguments": d.get("params") or {}}
            last_orch = root.add("agent", e.get("response") or "", e["ts"], model_name=e.get("model"),
                                 reasoning_content=(d or {}).get("reasoning") or None,
                                 tool_calls=[call] if call else None, metrics=_metrics(e),
                                 extra={"error": e["error"]} if e.get("error") else None)
        elif kind == "delegate":
            h = e.get("harness") or {}
            w = workers[agent] = _Traj(run_id, f"{run_id}/{agent}", "porchestra-worker", e.get("model_name"),
                                       {"harness": h, "parent": "orchestrator"})
            order.append(agent)
            w.add("user", f"Your task: {h.get('subgoal', '')}\n\nContext: {h.get('context', '')}".strip(), e["ts"],
                  extra={"tools": h.get("tools"), "step_budget": h.get("step_budget")})
            if last_orch is not None:
                ref = {"trajectory_id": w.trajectory_id, "session_id": run_id}
                obs = last_orch.setdefault("observation", {"results": []})
                obs["results"].append({"source_call_id": (last_orch.get("tool_calls") or [{}])[0].get("tool_call_id"),
                                       "subagent_trajectory_ref": [ref]})
        elif kind == "llm_call" and agent in workers:
            d = _decision(e.get("response"))
            call = None if d is None else {"tool_call_id": f"{agent}-s{e['step']}", "function_name": d.get("action"),
                                            "arguments": d.get("params") or d.get("action_input") or {}}
            workers[agent].add("agent", e.get("response") or "", e["ts"], model_name=e.get("model"),
                               reasoning_content=(d or {}).get("memory") or None, tool_calls=[call] if call else None,
                               metrics=_metrics(e))
        elif kind in ("tool_call", "report", "fault", "format_error") and agent in workers:
            last = workers[agent].steps[-1]
            if kind == "tool_call":
                out = e.get("output") or {}
                content = out.get("text", "") if e.get("ok") else f"error: {e.get('error')}"
                src = (last.get("tool_calls") or [{}])[0].get("tool_call_id")
                last.setdefault("observation", {"results": []})["results"].append(
                    {"source_call_id": src, "content": content})
            else:
                last.setdefault("extra", {}).setdefault(kind, []).append(
                    {k: v for k, v in e.items() if k not in ("v", "ts", "run_id", "task_id", "agent_id",
                                                            "parent_agent_id", "event")})
        elif kind == "revise" and agent in workers:
            workers[agent].add("user", "[revise_task] " + json.dumps(e.get("revision") or {}, ensure_ascii=False),
                               e["ts"], extra={"harness_after": e.get("harness"),
                                               "harness_before": e.get("harness_before")})
        elif kind == "terminate" and agent in workers:
            workers[agent].doc["agent"]["extra"]["ended"] = e.get("reason")
        elif kind == "complete" and last_orch is not None:
            last_orch.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": (last_orch.get("tool_calls") or [{}])[0].get("tool_call_id"),
                 "content": str(e.get("answer") or e.get("message") or e.get("submission") or "")})
    end = next((e for e in reversed(events) if e["event"] == "task_end"), None)
    doc = root.finish()
    if order:
        doc["subagent_trajectories"] = [workers[w].finish() for w in order]
    doc["extra"] = {"task_end": {k: end.get(k) for k in ("success", "score", "reason", "totals")} if end else None}
    doc["notes"] = "Exported from a porchestra event log (v1); each worker is an embedded subagent trajectory."
    return doc
