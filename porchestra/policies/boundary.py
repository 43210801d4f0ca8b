"""Re-orchestration baselines that differ only in *when* the orchestrator regains control.

- `aorchestra`: only at worker return (finish / stop / budget end); no revise on either side.
- `trigger` (MAS2-style): at worker return or right after a failed tool call (tool or code error).
- `polling:K`: every K steps of a worker (paper: 5, 10, 20); the orchestrator may revise, terminate,
  delegate or end; a no-op revise_task lets the worker continue.
Workers in these modes cannot send `revise`: proactive feedback is exactly what is replaced.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .base import ControlPolicy

if TYPE_CHECKING:
    from ..agents import StepRecord, Worker
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context

NO_REVISE = frozenset({"finish", "stop"})


class AOrchestraPolicy(ControlPolicy):
    name = "aorchestra"
    comm_actions = NO_REVISE
    can_revise = False  # the orchestrator only delegates anew or ends; returned workers are over


CODE_ERROR = re.compile(r"Traceback \(most recent call last\)|\[exit code [1-9]\d*\]|\[timed out")


def _last_output(rt: "Runtime", worker: "Worker") -> str:
    for e in reversed(rt.log.events):
        if e["event"] == "tool_call" and e["agent_id"] == worker.id:
            return (e.get("output") or {}).get("text", "")
    return ""


class TriggerPolicy(ControlPolicy):
    """A tool error is a failed call; a code error is a call that ran but whose output shows a
    traceback or a non-zero exit (e.g. SWE-bench `bash`, which reports `[exit code N]`)."""

    name = "trigger"
    comm_actions = NO_REVISE

    def after_step(self, rt: "Runtime", worker: "Worker", record: "StepRecord") -> tuple[str, str] | None:
        if record.format_error:
            return None
        if not record.ok:
            return "trigger", f"tool error in {record.tool}: {record.error}"
        m = CODE_ERROR.search(_last_output(rt, worker))
        if m:
            return "trigger", f"code error in the output of {record.tool}: {m.group(0)}"
        return None


class PollingPolicy(ControlPolicy):
    name = "polling"
    comm_actions = NO_REVISE

    def __init__(self, every: str | int = 10):
        self.every = int(every)
        if self.every < 1:
            raise ValueError("polling interval must be a positive number of steps")

    def after_step(self, rt: "Runtime", worker: "Worker", record: "StepRecord") -> tuple[str, str] | None:
        if worker.steps_used % self.every == 0:
            return "poll", f"every {self.every} worker steps (step {worker.steps_used} of {worker.id})"
        return None

    def describe(self) -> dict:
        return {**super().describe(), "every": self.every}
