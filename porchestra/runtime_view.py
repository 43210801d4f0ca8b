"""What the orchestrator sees: the runtime state rendered into template variables.

Kept apart from the loop so that the loop stays a screenful and prompt sets can rely on one,
documented set of variables:

    task, updates, progress{step, global_steps, remaining_steps, workers_used, max_workers},
    memory[str], handoff{worker_id, kind, status, steps_used, remaining, harness, report_type,
    report_text, detail, recent_text} | None, allowed_actions, ablate, models{name: spec},
    tools (list[Tool]), tools_text, end_action, default_worker_steps, hint_slot, + env.prompt_vars()
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .protocol import Handoff
from .tools.base import render_tools

if TYPE_CHECKING:  # the view reads a RunContext (porchestra.context); this module imports no loop or agent
    from .context import RunContext, WorkerView


def tools_text(tools: list[Any]) -> str:
    return render_tools(tools) or "(none)"


def report_payload(handoff: Handoff, ablate: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The report as the orchestrator sees it. An ablated protocol field is absent, not empty: without
    Request the orchestrator gets neither the task-scope/resource proposal nor the request text."""
    r = handoff.report
    if r is None:
        return {}
    action: dict[str, Any] = {"type": r.type}
    if "request" not in ablate:
        action |= {"task_scope": r.task_scope.model_dump(), "resource": r.resource.model_dump(),
                   "request": r.request, "reason": r.reason}
    data: dict[str, Any] = {"state": r.state, "action": action, "evidence": r.evidence.model_dump()}
    if not r.state:
        data.pop("state")
    if "request" in action and not r.request and not r.reason:
        action.pop("request")
        action.pop("reason")
    if not r.evidence.summary and not r.evidence.raw:
        data.pop("evidence")
    return data


def render_report(worker: "WorkerView", handoff: Handoff, ablate: frozenset[str] = frozenset()) -> str:
    if handoff.report is not None:
        body = json.dumps(report_payload(handoff, ablate), ensure_ascii=False)
        return f"[{worker.id} {handoff.report.type}] subgoal: {worker.harness.subgoal}\n{body}"
    return f"[{worker.id} {handoff.kind}] subgoal: {worker.harness.subgoal}\n{handoff.detail}"


def _recent_text(handoff: Handoff) -> str:
    lines = []
    for r in handoff.recent_steps:
        status = "ok" if r["ok"] else f"error: {r['error']}"
        lines.append(f"- step {r['step']}: {r['tool'] or '(malformed reply)'} → {status}")
    return "\n".join(lines) or "(no steps)"


def orchestrator_vars(rt: "RunContext", handoff: Handoff | None, allowed: list[str]) -> dict[str, Any]:
    b = rt.cfg.budgets
    tools = rt.all_tools()
    view = None
    if handoff is not None:
        w = rt.workers[handoff.worker_id]
        view = {**w.view(), "worker_id": w.id, "kind": handoff.kind, "detail": handoff.detail,
                "report_type": handoff.report.type if handoff.report else None,
                "report_text": json.dumps(report_payload(handoff, rt.ablate), ensure_ascii=False),
                "recent_text": _recent_text(handoff)}
    return {
        "task": rt.task,
        "updates": list(rt.updates),
        "progress": {"step": rt.log.step, "global_steps": b.global_steps,
                     "remaining_steps": max(b.global_steps - rt.log.step, 0),
                     "workers_used": len(rt.workers), "max_workers": b.max_workers},
        "memory": list(rt.memory),
        "handoff": view,
        "allowed_actions": allowed,
        "ablate": rt.ablate.prompted_dimensions,
        "models": rt.cfg.worker_model_names(),
        "tools": tools,
        "tools_text": tools_text(tools),
        "end_action": rt.env.end_action,
        "default_worker_steps": b.worker_steps,
        **rt.env.prompt_vars(),
    }
