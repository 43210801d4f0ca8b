"""Single-agent baselines without an orchestrator: `react` (all tools, the benchmark's own worker
format). `mini-swe` (its own prompt and action format) builds on this in :mod:`.mini_swe`.

The policy makes the decisions itself, so no orchestrator LLM call is ever made: it delegates the whole
task with the global step budget, and ends the task with the worker's `finish` result. The agent keeps
one linear history for the whole task: a new user message (multi-turn benchmarks) is appended to the
same agent's history as a no-op revision carrying the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import DelegateTask, EndTask, Handoff, Report, ReviseTask
from .base import ControlPolicy

if TYPE_CHECKING:
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context

SOLO_CONTEXT = ("You work alone: there is no MainAgent to help. Solve the whole task with your tools. "
                "When done, use finish and put the final answer (exact and concise) in evidence.raw.answer.")


def finish_answer(report: Report | None) -> str | None:
    """The result a `finish` report carries: evidence.raw.answer (or result/final_answer), else state."""
    if report is None or report.type != "finish":
        return None
    raw = report.evidence.raw
    for key in ("answer", "final_answer", "result"):
        if raw.get(key) not in (None, ""):
            return str(raw[key])
    return report.state or report.evidence.summary or None


def end_with(rt: "Runtime", answer: str | None, reasoning: str) -> EndTask:
    return rt.env.end_decision(answer, reasoning)  # the environment owns its end action and field


class ReactPolicy(ControlPolicy):
    name = "react"
    comm_actions = frozenset({"finish"})
    can_revise = False
    solo_context = SOLO_CONTEXT

    def tools_for(self, rt: "Runtime") -> list[str]:
        return rt.tool_names()

    def keeps_worker(self, handoff: Handoff) -> bool:
        # a finished agent stays live so that a new user message continues the same history
        return handoff.report is not None and handoff.report.type == "finish"

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        remaining = max(rt.cfg.budgets.global_steps - rt.log.step, 1)
        if handoff is not None:  # the agent handed back: finish, budget end or an error
            answer = finish_answer(handoff.report)
            return end_with(rt, answer, f"single agent ended: {handoff.kind}"), None
        agent = next(iter(rt.workers.values()), None)
        if agent is None:
            d = DelegateTask(reasoning="single agent: the whole task", task_instruction=rt.task.instruction,
                             context=self.solo_context, tools=self.tools_for(rt), step_budget=remaining)
            return d, rt.validate(d, None)
        if agent.status == "paused":  # a new user message after the end of a turn
            news = "\n".join(rt.updates[rt.policy_state.get("seen_updates", 0):])
            rt.policy_state["seen_updates"] = len(rt.updates)
            d = ReviseTask(reasoning="new user message", context=news or None,
                           step_budget=max(remaining - agent.remaining, 0) or None)
            return d, rt.validate(d, None)
        return end_with(rt, None, "the single agent cannot continue"), None
