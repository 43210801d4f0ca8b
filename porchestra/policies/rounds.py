"""`orchestra-o1`: rounds of delegation. The orchestrator delegates a round of independent subtasks
(`delegate_tasks`, or one `delegate_task`); the round's workers run in parallel to their return; once
every worker of the round has returned, the orchestrator sees all their summaries and plans the next
round or ends. No revise. `orchestra-o1:N` caps the parallel workers at N (default: the whole round).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import Handoff, Wait
from .base import ControlPolicy

if TYPE_CHECKING:
    from ..loop import Runtime


class OrchestraO1Policy(ControlPolicy):
    name = "orchestra-o1"
    comm_actions = frozenset({"finish", "stop"})
    can_revise = False

    def __init__(self, parallel: str | int = 0):
        self.parallel = int(parallel)
        if self.parallel < 0:
            raise ValueError("parallel workers must be a positive number")

    def parallelism(self, rt: "Runtime") -> int:
        return self.parallel or max(rt.cfg.budgets.max_parallel, rt.cfg.budgets.max_workers)

    def orchestrator_actions(self, rt: "Runtime", handoff: Handoff | None) -> list[str]:
        can_end = bool(rt.workers) or not getattr(rt.cfg.budgets, "require_delegation", False)
        return ["delegate_tasks", "delegate_task"] + ([rt.env.end_action] if can_end else [])

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        returned = rt.policy_state.setdefault("returned", set())
        if handoff is not None:
            returned.add(handoff.worker_id)
            if any(wid not in returned for wid in rt.workers):  # the round is not over yet
                return Wait(reasoning="waiting for the rest of the round"), None
        return rt.ask_orchestrator(handoff, self.orchestrator_actions(rt, handoff))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "parallel": self.parallel or "round"}
