"""Typed objects of the proactive protocol: harness, worker reports, orchestrator decisions.

The JSON shapes follow paper Appendix F (docs/contracts.md §1). Parsing text into these objects
lives in :mod:`porchestra.parsing`; applying a revision to a harness lives in :mod:`porchestra.harness`.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

ScopeOp = Literal["keep", "reduce", "expand", "remove", "decompose", "follow_up"]
ResourceOp = Literal["keep", "request"]
ResourceObject = Literal["context", "tool", "budget", "constraint", "state_handoff", "none"]
CommType = Literal["finish", "revise", "stop"]
COMM_ACTIONS: tuple[str, ...] = ("finish", "revise", "stop")
END_ACTIONS: tuple[str, ...] = ("complete", "finalize_task", "submit")


class _Loose(BaseModel):
    """Models read from LLM output: unknown keys are kept, never an error."""

    model_config = ConfigDict(extra="allow")


class TaskScope(_Loose):
    operation: ScopeOp = "keep"
    object: str = ""
    details: str = ""


class Resource(_Loose):
    operation: ResourceOp = "keep"
    object: ResourceObject = "none"
    details: str = ""


class Harness(BaseModel):
    """Φ_i: what one worker may do. Enforced by the runtime, not only shown in the prompt."""

    subgoal: str
    context: str = ""
    tools: list[str] = Field(default_factory=list)
    step_budget: int = 30
    model: str | None = None
    constraints: list[str] = Field(default_factory=list)


class Evidence(_Loose):
    summary: str = ""
    raw: dict[str, Any] = Field(default_factory=dict)

    @field_validator("raw", mode="before")
    @classmethod
    def _raw_as_dict(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):  # a bare string or list is kept, under one key
            return {"value": v}
        return v


class Report(_Loose):
    """A worker's communication action: finish | revise | stop with state, request and evidence."""

    type: CommType
    state: str = ""
    request: str = ""
    reason: str = ""
    task_scope: TaskScope = Field(default_factory=TaskScope)
    resource: Resource = Field(default_factory=Resource)
    evidence: Evidence = Field(default_factory=Evidence)
    memory: str = ""


class ToolCall(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    memory: str = ""
    thought: str = ""


WorkerAction = Union[ToolCall, Report]


# --- orchestrator decisions -------------------------------------------------------------------


class DelegateTask(BaseModel):
    action: Literal["delegate_task"] = "delegate_task"
    reasoning: str = ""
    task_instruction: str
    context: str = ""
    tools: list[str] = Field(default_factory=list)
    step_budget: int | None = None
    model: str | None = None
    constraints: list[str] = Field(default_factory=list)


class Executor(_Loose):
    operation: Literal["keep", "replace"] = "keep"
    model: str | None = None


class ReviseTask(BaseModel):
    """revise_task: update the paused, live worker. `tools` is the complete list after the revision;
    `step_budget` adds steps. A revision with nothing set lets the worker continue unchanged."""

    action: Literal["revise_task"] = "revise_task"
    reasoning: str = ""
    task_scope: TaskScope = Field(default_factory=TaskScope)
    resource: Resource = Field(default_factory=Resource)
    context: str | None = None
    tools: list[str] | None = None
    step_budget: int | None = None
    instruction: str | None = None
    constraints: list[str] | None = None
    executor: Executor = Field(default_factory=Executor)
    worker_id: str | None = None  # which worker, when several are live (concurrent modes)


class Terminate(BaseModel):
    action: Literal["terminate"] = "terminate"
    reasoning: str = ""
    reason: str = ""
    worker_id: str | None = None


class EndTask(BaseModel):
    """The orchestrator's end action. Which action and which `params` field carries its value belong
    to the environment (`Environment.end_action` / `end_field`): complete/answer (GAIA, τ², BFCL),
    finalize_task/message (GAIA2), submit/reason (SWE-bench), or a plugin's own (kept as an extra field)."""

    model_config = ConfigDict(extra="allow")

    action: str = "complete"
    reasoning: str = ""
    answer: str | None = None
    message: str | None = None
    reason: str | None = None

    def value(self, field: str) -> str | None:
        """The end action's value under `field` (the environment's `end_field`)."""
        v = getattr(self, field, None) if field in type(self).model_fields else (self.model_extra or {}).get(field)
        return None if v is None else str(v)


class DelegateBatch(BaseModel):
    """Several independent delegations run at once (orchestra-o1 rounds, concurrent mode)."""

    action: Literal["delegate_tasks"] = "delegate_tasks"
    reasoning: str = ""
    tasks: list[DelegateTask]


class Wait(BaseModel):
    """Concurrent modes only: let the running workers go on until the next report."""

    action: Literal["wait"] = "wait"
    reasoning: str = ""


Decision = Union[DelegateTask, ReviseTask, Terminate, EndTask, DelegateBatch, Wait]


class Handoff(BaseModel):
    """Why control came back to the orchestrator from a worker."""

    worker_id: str
    kind: Literal["report", "budget_exhausted", "poll", "trigger", "error", "notification"]
    report: Report | None = None
    detail: str = ""
    recent_steps: list[dict[str, Any]] = Field(default_factory=list)
