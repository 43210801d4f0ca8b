"""Applying orchestrator decisions to harnesses.

`apply_revision` is the only place a live harness changes. Ablations turn off one revision dimension
at a time (task_scope, context, tools, budget — paper B.2): the field is ignored and the worker keeps
its initial value; what was ignored is returned so it can be logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .protocol import DelegateTask, Harness, ReviseTask

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
    return out
