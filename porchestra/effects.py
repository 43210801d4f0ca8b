"""What a validated decision does, as typed values the runtime executes (porchestra/loop.py).

Validation (`RunContext.validate`) has no side effects: it checks a decision against the run state
and returns one of these. Only the runtime's `execute` turns an effect into state changes and
events, so every change to the set of workers happens in one place.

    delegate_task / delegate_tasks → StartWorkers     revise_task → ReviseWorker
    terminate → CloseWorker     end action → EndRun     wait → Continue
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from .harness import RevisionOutcome
from .protocol import DelegateBatch, DelegateTask, EndTask, Harness, ReviseTask, Terminate, Wait


@dataclass(frozen=True)
class StartWorkers(Sequence):
    """Start one worker per harness, in order. Also the sequence of those harnesses (policies that
    plan ahead read them: `for h in effect`)."""

    harnesses: tuple[Harness, ...]
    reasoning: str = ""

    def __getitem__(self, i: Any) -> Any:
        return self.harnesses[i]

    def __len__(self) -> int:
        return len(self.harnesses)


@dataclass(frozen=True)
class ReviseWorker:
    """Apply a validated revision to a paused worker (or replace it, or end its path)."""

    revision: ReviseTask
    worker: Any  # the paused worker (porchestra.agents.Worker)
    outcome: RevisionOutcome


@dataclass(frozen=True)
class CloseWorker:
    worker: Any
    reason: str


@dataclass(frozen=True)
class EndRun:
    """End the task with this end action; None: end it without one (a policy with nothing to say)."""

    end: EndTask | None


@dataclass(frozen=True)
class Continue:
    """Nothing changes; running workers go on (concurrent modes' `wait`)."""


Effect = Union[StartWorkers, ReviseWorker, CloseWorker, EndRun, Continue]
EFFECT_TYPES = (StartWorkers, ReviseWorker, CloseWorker, EndRun, Continue)


def as_effect(decision: Any, plan: Any) -> Effect:
    """The effect of (decision, plan) as a policy returned them. A policy that builds its own plan
    (a fixed workflow's next harness, a ReAct step) may give a list of harnesses, a (worker, outcome)
    pair or a worker, as before effects were typed; they are read here, in one place."""
    if isinstance(plan, EFFECT_TYPES):
        return plan
    if isinstance(decision, (DelegateTask, DelegateBatch)):
        return StartWorkers(tuple(plan), decision.reasoning)
    if isinstance(decision, ReviseTask):
        worker, outcome = plan
        return ReviseWorker(decision, worker, outcome)
    if isinstance(decision, Terminate):
        return CloseWorker(plan, decision.reason or decision.reasoning or "terminated by the orchestrator")
    if isinstance(decision, EndTask):
        return EndRun(decision)
    if isinstance(decision, Wait):
        return Continue()
    raise TypeError(f"unknown decision {decision!r}")
