"""Applying orchestrator decisions to harnesses, and what of a revision the worker is told.

`apply_revision` is the only place a live harness changes. Ablations turn off one revision dimension
at a time (task_scope, context, tools, budget, constraints — paper B.2): the field is ignored and the
worker keeps its initial value; what was ignored is returned so it can be logged (the `revise` event),
but it is never shown to the worker (:func:`worker_revision_view`).

Scope and resource operations with a runtime meaning (docs/modes.md, "Revision operations"):
- task_scope `remove`: the worker's path ends (the runtime terminates it, by the orchestrator).
- task_scope `decompose`: the orchestrator answers with delegate_task(s); the new workers' `delegate`
  events name the decomposed worker as `parent` and it is closed ("decomposed into ...").
  In a `revise_task` the worker goes on with its (narrowed) harness as one part and the orchestrator's
  next delegation, made in a later turn, is the rest: its workers name the revised worker as `parent`
  (`lineage: "decompose"`), which is not closed.
- resource `state_handoff` / executor `replace`: the worker's last reported state and evidence travel
  into the context of the replacement or re-delegated worker (:func:`with_state_handoff`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .protocol import DelegateTask, Harness, Report, ReviseTask

REVISION_DIMENSIONS = ("task_scope", "context", "tools", "budget", "constraints")


class DecisionError(ValueError):
    """A well-formed decision that cannot be applied (unknown tool, no live worker, limits).
    Shown to the orchestrator as a corrective observation, like a format error."""


@dataclass
class RevisionOutcome:
    harness: Harness
    added_tools: list[str] = field(default_factory=list)
    removed_tools: list[str] = field(default_factory=list)
    added_steps: int = 0
    ignored: list[str] = field(default_factory=list)  # dimensions refused by ablation
    constraints_changed: bool = False
    remove: bool = False  # task_scope remove: the worker's path ends
    decompose: bool = False  # task_scope decompose: the worker keeps one part; the next delegation is the rest

    @property
    def changed(self) -> bool:
        return bool(self.added_tools or self.removed_tools or self.added_steps) or self._text_changed

    _text_changed: bool = False


def check_tools(names: list[str], available: list[str]) -> None:
    unknown = [n for n in names if n not in available]
    if unknown:
        raise DecisionError(f"unknown tool(s) {unknown}; available tools: {', '.join(available)}")


def harness_from_delegation(d: DelegateTask, available_tools: list[str], default_steps: int,
                            model_names: dict[str, str]) -> Harness:
    tools = list(dict.fromkeys(d.tools)) if d.tools else list(available_tools)
    check_tools(tools, available_tools)
    if d.model is not None and d.model not in model_names and d.model not in model_names.values():
        raise DecisionError(f"unknown model {d.model!r}; available models: {', '.join(model_names)}")
    if d.step_budget is not None and d.step_budget < 1:
        raise DecisionError("step_budget must be a positive number of steps")
    if not d.task_instruction.strip():
        raise DecisionError("task_instruction is empty")
    return Harness(subgoal=d.task_instruction, context=d.context, tools=tools,
                   step_budget=d.step_budget or default_steps, model=d.model, constraints=d.constraints)


def apply_revision(h: Harness, r: ReviseTask, available_tools: list[str],
                   ablate: frozenset[str] | set[str] = frozenset()) -> RevisionOutcome:
    """A new harness for the live worker. `tools` is the complete list after the revision;
    `step_budget` adds steps; `context` is appended; `instruction` replaces the subgoal."""
    new = h.model_copy(deep=True)
    out = RevisionOutcome(harness=new)

    if r.instruction is not None and r.instruction.strip() and r.instruction.strip() != h.subgoal:
        if "task_scope" in ablate:
            out.ignored.append("task_scope")
        else:
            new.subgoal = r.instruction.strip()
            out._text_changed = True
    if r.context is not None and r.context.strip():
        if "context" in ablate:
            out.ignored.append("context")
        else:
            new.context = (h.context + "\n\n" + r.context.strip()).strip()
            out._text_changed = True
    if r.tools is not None and list(dict.fromkeys(r.tools)) != h.tools:
        check_tools(r.tools, available_tools)
        if "tools" in ablate:
            out.ignored.append("tools")
        else:
            new.tools = list(dict.fromkeys(r.tools))
            out.added_tools = [t for t in new.tools if t not in h.tools]
            out.removed_tools = [t for t in h.tools if t not in new.tools]
    if r.step_budget:
        if r.step_budget < 0:
            raise DecisionError("step_budget adds steps and must be positive")
        if "budget" in ablate:
            out.ignored.append("budget")
        else:
            new.step_budget = h.step_budget + r.step_budget
            out.added_steps = r.step_budget
    if r.constraints is not None and r.constraints != h.constraints:
        if "constraints" in ablate:
            out.ignored.append("constraints")
        else:
            new.constraints = list(r.constraints)
            out._text_changed = True
            out.constraints_changed = True
    if r.task_scope.operation in ("remove", "decompose"):
        if "task_scope" in ablate:
            if "task_scope" not in out.ignored:  # once, also when the instruction was refused too
                out.ignored.append("task_scope")
        elif r.task_scope.operation == "remove":
            out.remove = True
        else:
            out.decompose = True
    if r.executor.operation == "replace" and r.executor.model:
        new.model = r.executor.model  # the replacement's model is part of the new harness (and of its revise event)
    return out


# resource.object → the revision dimension it belongs to (state_handoff / none belong to none)
RESOURCE_DIMENSION = {"context": "context", "tool": "tools", "budget": "budget", "constraint": "constraints"}


def worker_revision_view(r: ReviseTask, out: RevisionOutcome, ablate: frozenset[str] | set[str],
                         share_reasoning: bool = False) -> dict[str, Any]:
    """The parts of a revision the resuming worker is shown (variables of `revision.j2`).

    Nothing of an ablated dimension reaches the worker in any form: not its task_scope/resource
    operation, object or details, not the changed value, not even that a change was refused. The
    orchestrator's private `reasoning` is shown only when `share_reasoning` is set (RunConfig
    `revision_reasoning`, off by default) and never while any revision dimension is ablated, since free
    text can carry an ablated change."""
    off = set(ablate) & set(REVISION_DIMENSIONS)
    scope = None
    if "task_scope" not in off and (r.task_scope.operation != "keep" or r.task_scope.details):
        scope = r.task_scope.model_dump(include={"operation", "object", "details"})
    resource = None
    dim = RESOURCE_DIMENSION.get(r.resource.object)
    if (r.resource.operation != "keep" or r.resource.details) and (dim is None or dim not in off):
        resource = r.resource.model_dump(include={"operation", "object", "details"})
    return {
        "reasoning": r.reasoning if share_reasoning and not off and r.reasoning else "",
        "task_scope": scope,
        "resource": resource,
        "context": r.context.strip() if r.context and "context" not in out.ignored else "",
        "constraints": list(out.harness.constraints) if out.constraints_changed else None,
    }


def handoff_text(worker_id: str, report: Report | None) -> str:
    """A worker's last reported state and evidence, as context for whoever continues its work."""
    if report is None:
        return ""
    parts = []
    if report.state:
        parts.append(f"State: {report.state}")
    if report.evidence.summary:
        parts.append(f"Evidence: {report.evidence.summary}")
    if report.evidence.raw:
        parts.append("Raw evidence: " + json.dumps(report.evidence.raw, ensure_ascii=False))
    return f"State handed off from {worker_id}:\n" + "\n".join(parts) if parts else ""


def with_state_handoff(h: Harness, worker_id: str, report: Report | None) -> Harness:
    """A copy of `h` whose context carries `worker_id`'s last report (state_handoff)."""
    text = handoff_text(worker_id, report)
    if not text:
        return h
    new = h.model_copy(deep=True)
    new.context = (new.context + "\n\n" + text).strip()
    return new
