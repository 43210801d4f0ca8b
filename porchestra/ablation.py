"""What each `--ablate` name turns off, in one place (paper B.2 and the protocol ablations).

- Revision dimensions (task_scope, context, tools, budget, constraints): the orchestrator may still
  ask for the change, but it is ignored — `harness.apply_revision` keeps the initial value and records
  the dimension in `ignored`; nothing of it reaches the worker (`harness.worker_revision_view`).
- Protocol fields (state, request, evidence): a worker's report loses the field as it arrives
  (:meth:`Ablation.strip_report`), so the log, the orchestrator's view and its memory never hold it;
  the worker's prompt and action schema do not offer it. Ablating `request` removes the whole Request
  signal: the proposal (task_scope, resource) and its text.

The runtime holds one :class:`Ablation` per task; it is a frozenset of the names, so the harness,
schema and template code that only asks `"tools" in ablate` takes it as is.
"""

from __future__ import annotations

from typing import Iterable

from .harness import REVISION_DIMENSIONS
from .protocol import Report

PROTOCOL_FIELDS = ("state", "request", "evidence")
# the revision dimensions the orchestrator's prompt names as unavailable (its templates predate constraints)
PROMPTED_DIMENSIONS = ("task_scope", "context", "tools", "budget")
ABLATIONS = REVISION_DIMENSIONS + PROTOCOL_FIELDS


class Ablation(frozenset):
    """The ablations of one run."""

    def __new__(cls, names: Iterable[str] = ()) -> "Ablation":
        return super().__new__(cls, names)

    @property
    def revision_dimensions(self) -> list[str]:
        return [d for d in REVISION_DIMENSIONS if d in self]

    @property
    def prompted_dimensions(self) -> list[str]:
        return sorted(d for d in PROMPTED_DIMENSIONS if d in self)

    @property
    def protocol_fields(self) -> list[str]:
        return [f for f in PROTOCOL_FIELDS if f in self]

    def strip_report(self, report: Report) -> Report:
        """The report as the run keeps it: ablated protocol fields emptied."""
        drop = set(self.protocol_fields)
        if not drop:
            return report
        data = report.model_dump()
        if "state" in drop:
            data["state"] = ""
        if "request" in drop:  # the whole Request signal: proposal and text
            data["request"] = data["reason"] = ""
            data["task_scope"], data["resource"] = {}, {}
        if "evidence" in drop:
            data["evidence"] = {}
        return Report.model_validate(data)
