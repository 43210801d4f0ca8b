"""Offline orchestration baselines: the whole team and workflow are fixed before execution starts.

`skill-mas` (Skill-MAS): one generation call whose prompt carries the *initial meta-skill* — task
decomposition, agent engineering, workflow orchestration — and returns the task-specific team and
its executable workflow (`skill_mas_plan.j2`).

`autoagents` (AutoAgents; `offline` is an alias of it): a drafting stage of two calls. The Planner
drafts the agent team (roles, tool assignments) and the execution plan (`autoagents_planner.j2`);
the Observer reviews the draft against the task and returns the final, fixed one
(`autoagents_observer.j2`). Its agents are ReAct workers that reason locally within their step.

Both then execute the same way: one worker per workflow step, in order; a worker may only finish or
stop, the orchestrator never changes a harness, and what a worker returned is passed on to the next
worker's context (the workflow's data flow, not a re-orchestration). The final answer comes from one
synthesis call of the ordinary orchestrator prompt restricted to the end action, which sees every
worker's report — chosen over "last worker's result" because plans often end with a check step whose
output is not the answer. Deviations from the original systems: docs/modes.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..agents import tools_text
from ..protocol import DelegateBatch, DelegateTask, Handoff
from ._ask import ask_with_template
from .base import ControlPolicy

if TYPE_CHECKING:
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context


def plan_variables(rt: "Runtime") -> dict[str, Any]:
    b = rt.cfg.budgets
    return {"task": rt.task, "tools_text": tools_text(rt.all_tools()), "max_workers": b.max_workers,
            "default_worker_steps": b.worker_steps, "models": rt.cfg.worker_model_names(),
            "end_action": rt.env.end_action, **rt.env.prompt_vars()}


def render_plan(tasks: list[DelegateTask]) -> str:
    return "\n".join(f"{i}. {t.task_instruction} | tools: {', '.join(t.tools) or 'all'}"
                     + (f" | context: {t.context}" if t.context else "") for i, t in enumerate(tasks, 1))


class FixedWorkflowPolicy(ControlPolicy):
    """Runs a workflow drafted once by :meth:`draft`; subclasses differ only in how they draft."""

    name = "fixed-workflow"
    comm_actions = frozenset({"finish", "stop"})
    can_revise = False

    def draft(self, rt: "Runtime") -> tuple[DelegateBatch, list[Any]]:
        raise NotImplementedError

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        st = rt.policy_state
        if "plan" not in st:
            batch, harnesses = self.draft(rt)
            st["plan"], st["tasks"], st["next"] = list(harnesses), list(batch.tasks), 0
            rt.log.emit("plan", "orchestrator", None, subtasks=[h.model_dump() for h in harnesses], mode=self.name)
        if handoff is not None:
            w = rt.workers[handoff.worker_id]
            r = handoff.report
            result = (f"{r.type}: {r.state} {r.evidence.summary}".strip() if r is not None else handoff.kind)
            st.setdefault("results", []).append(f"[{w.id}] {w.harness.subgoal}\n{result}")
        i = st["next"]
        if i < len(st["plan"]):
            st["next"] = i + 1
            harness = st["plan"][i].model_copy(deep=True)
            if st.get("results"):
                harness.context = (harness.context + "\n\nResults of earlier steps:\n"
                                   + "\n".join(st["results"])).strip()
            d = st["tasks"][i]
            return DelegateTask(**{**d.model_dump(), "reasoning": f"{self.name} workflow step {i + 1}"}), [harness]
        return rt.ask_orchestrator(handoff, [rt.env.end_action])  # final synthesis

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "planning": "once, before execution", "final": "synthesis call"}


class SkillMasPolicy(FixedWorkflowPolicy):
    name = "skill-mas"

    def draft(self, rt: "Runtime") -> tuple[DelegateBatch, list[Any]]:
        return ask_with_template(rt, "skill_mas_plan.j2", plan_variables(rt), ["delegate_tasks"],
                                 lambda d: rt.validate(d, None))


class AutoAgentsPolicy(FixedWorkflowPolicy):
    name = "autoagents"

    def draft(self, rt: "Runtime") -> tuple[DelegateBatch, list[Any]]:
        variables = plan_variables(rt)
        draft, _ = ask_with_template(rt, "autoagents_planner.j2", variables, ["delegate_tasks"],
                                     lambda d: rt.validate(d, None))
        rt.log.emit("draft", "orchestrator", None, stage="planner", subtasks=[t.model_dump() for t in draft.tasks])
        return ask_with_template(rt, "autoagents_observer.j2", {**variables, "draft": render_plan(draft.tasks)},
                                 ["delegate_tasks"], lambda d: rt.validate(d, None))


OfflinePolicy = AutoAgentsPolicy  # `offline` is documented as an alias of `autoagents`

__all__ = ["AutoAgentsPolicy", "FixedWorkflowPolicy", "OfflinePolicy", "SkillMasPolicy"]
