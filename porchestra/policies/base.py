"""Control policies: *when* the orchestrator regains control and what workers may send.

The loop (porchestra/loop.py) exists once; a baseline is a small subclass of `ControlPolicy`.
Every hook's `rt` is the run's :class:`porchestra.context.RunContext` — read-only views plus a few
operations (ask the orchestrator, validate a decision) — never the runtime itself. Hooks, all optional:
- `comm_actions`: what a worker may send (finish / revise / stop).
- `orchestrator_actions(rt, handoff)`: the orchestrator's allowed actions at this point.
- `decide(rt, handoff)`: produce the next decision (default: ask the orchestrator model); a policy
  without an orchestrator (ReAct) or with a fixed plan (offline) returns decisions itself.
- `after_step(rt, worker, record)`: return (kind, detail) — kind "poll" or "trigger" — to hand
  control back to the orchestrator after a worker tool step (polling, triggers); None to go on.
- `keeps_worker(handoff)`: whether a worker stays live (revisable) after handing off.
- `parallelism(rt)`: how many live workers run at once (default: cfg.budgets.max_parallel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import Decision, Handoff

if TYPE_CHECKING:  # hooks get the run's narrow context (porchestra/context.py), never the runtime
    from ..agents import StepRecord, Worker
    from ..context import RunContext


class ControlPolicy:
    name = "base"
    comm_actions: frozenset[str] = frozenset({"finish", "revise", "stop"})
    can_revise = True
    # a baseline with its own worker prompt (system, first user message) and action format
    worker_templates: tuple[str, str] = ("worker_system.j2", "worker_task.j2")
    parse_worker: Any = None  # None: the environment's worker format; else f(rt, text, comm) -> action
    # a mode's own template directory, searched before the benchmark's prompt set (a plan template,
    # or its own versions of worker_system.j2 / orchestrator_system.j2 ...)
    prompt_dir: str | None = None

    def wrap_tools(self, layer: Any, env: Any, state: dict[str, Any]) -> Any:
        """The tool layer this policy's workers use (called once per task by the runtime); default:
        unchanged. `state` is the task's policy_state (orchestra-o1 keeps its candidate workspaces)."""
        return layer

    def orchestrator_actions(self, rt: "RunContext", handoff: Handoff | None) -> list[str]:
        actions = ["delegate_task"]
        if handoff is not None and handoff.report is not None and handoff.report.task_scope.operation == "decompose":
            actions.append("delegate_tasks")  # a decompose request may be answered with sub-tasks
        if self.can_revise and rt.revisable_worker(handoff) is not None:
            actions += ["revise_task", "terminate"]
        if rt.workers or not rt.cfg.budgets.require_delegation:
            actions.append(rt.env.end_action)
        return actions

    def decide(self, rt: "RunContext", handoff: Handoff | None) -> tuple[Decision, Any]:
        return rt.ask_orchestrator(handoff, self.orchestrator_actions(rt, handoff))

    def after_step(self, rt: "RunContext", worker: "Worker", record: "StepRecord") -> tuple[str, str] | None:
        return None

    def keeps_worker(self, handoff: Handoff) -> bool:
        """After `stop` or a runtime error the path is over; otherwise the worker pauses, live."""
        if not self.can_revise:
            return False
        return not (handoff.kind == "error" or (handoff.report is not None and handoff.report.type == "stop"))

    def parallelism(self, rt: "RunContext") -> int:
        return rt.cfg.budgets.max_parallel

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "comm_actions": sorted(self.comm_actions), "can_revise": self.can_revise}
