"""`proactive-concurrent[:N]`: the proactive protocol with independent subtasks running at once.

The orchestrator may start several workers with `delegate_tasks`; up to N (default: the configured
`max_parallel`, at least 2) run concurrently and each may send finish / revise / stop. The
orchestrator answers reports one at a time as they arrive, while the other workers keep running; each
decision sees the runtime as it is then (the handoff names the worker, and a revision applies to that
worker only), and a revised worker resumes at once. `wait` lets the others go on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import Handoff
from .base import ControlPolicy

if TYPE_CHECKING:
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context


class ConcurrentProactivePolicy(ControlPolicy):
    name = "proactive-concurrent"

    def __init__(self, parallel: str | int = 0):
        self.parallel = int(parallel)
        if self.parallel < 0:
            raise ValueError("parallel workers must be a positive number")

    def parallelism(self, rt: "Runtime") -> int:
        return self.parallel or max(rt.cfg.budgets.max_parallel, 2)

    def orchestrator_actions(self, rt: "Runtime", handoff: Handoff | None) -> list[str]:
        actions = super().orchestrator_actions(rt, handoff)
        others = [w for w in rt.workers.values() if w.status == "running"]
        wait = ["wait"] if rt.pending or others else []  # other workers' reports are still to come
        return actions[:1] + ["delegate_tasks"] + wait + [a for a in actions[1:] if a != "delegate_tasks"]
