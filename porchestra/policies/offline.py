"""`offline`: plan roles, tool assignments and the workflow once before execution (AutoAgents /
Skill-MAS style), then execute the plan fixed.

One orchestrator call with `offline_plan.j2` returns `delegate_tasks` (the ordered subtasks, each with
its instruction, context and tools). Workers then run one after another in plan order; none can ask
for a revision and the orchestrator never changes a harness. What a worker returned is passed on to
the next worker's context (the workflow's data flow, not a re-orchestration). The final answer comes
from one synthesis call of the ordinary orchestrator prompt restricted to the end action, which sees
every worker's report — chosen over "last worker's result" because plans often end with a check step
whose output is not the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..agents import tools_text
from ..protocol import DelegateBatch, DelegateTask, Handoff
from ._ask import ask_with_template
from .base import ControlPolicy

if TYPE_CHECKING:
    from ..loop import Runtime


class OfflinePolicy(ControlPolicy):
    name = "offline"
    comm_actions = frozenset({"finish", "stop"})
    can_revise = False

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        st = rt.policy_state
        if "plan" not in st:
            b = rt.cfg.budgets
            variables = {"task": rt.task, "tools_text": tools_text(rt.all_tools()), "max_workers": b.max_workers,
                         "default_worker_steps": b.worker_steps, "models": rt.cfg.worker_model_names(),
                         **rt.env.prompt_vars()}
            batch, harnesses = ask_with_template(rt, "offline_plan.j2", variables, ["delegate_tasks"],
                                                 lambda d: rt.validate(d, None))
            st["plan"], st["tasks"], st["next"] = harnesses, batch.tasks, 0
            rt.log.emit("plan", "orchestrator", None, subtasks=[h.model_dump() for h in harnesses])
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
            return DelegateTask(**{**d.model_dump(), "reasoning": f"offline plan step {i + 1}"}), [harness]
        return rt.ask_orchestrator(handoff, [rt.env.end_action])  # final synthesis

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "planning": "once, before execution", "final": "synthesis call"}


__all__ = ["OfflinePolicy", "DelegateBatch"]
