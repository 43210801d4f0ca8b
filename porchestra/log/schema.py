"""Event log v1 as types: one pydantic model per event type (documented in docs/events.md).

    for e in read_events("runs/x/events.jsonl"):
        if isinstance(e, ToolCallEvent) and not e.ok: print(e.step, e.tool, e.error)

Every line shares an envelope (`v, ts, run_id, task_id, step, agent_id, parent_agent_id, event`);
each type adds its own fields. The log may only *gain* fields, so unknown fields are kept (`extra`),
never an error, and an event type this version does not know reads as a plain :class:`Event`.

Events also read like the dicts they were written from (`e["tool"]`, `e.get("error")`, `"x" in e`
— the keys are exactly those of the JSON line), so readers written against dicts keep working.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

EVENT_LOG_VERSION = 1


class EventError(ValueError):
    """An event line that is not valid JSON or does not fit its type; the message names file:line."""


class Event(BaseModel):
    """The envelope every event carries."""

    # extra: the log may only gain fields; protected_namespaces: `model` and `model_name` are fields here
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    v: int = EVENT_LOG_VERSION
    ts: str
    run_id: str
    task_id: str
    step: int = Field(ge=0)
    agent_id: str
    parent_agent_id: str | None = None
    event: str

    # --- read like the JSON object it came from -------------------------------------------------
    def _keys(self) -> list[str]:
        return [k for k in type(self).model_fields if k in self.model_fields_set] + list(self.model_extra or {})

    def keys(self) -> list[str]:
        return self._keys()

    def __getitem__(self, key: str) -> Any:
        if key in self.model_fields_set or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self.model_fields_set or key in (self.model_extra or {})

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self._keys()]

    def to_dict(self) -> dict[str, Any]:
        """The event as its JSON object (only the keys the line had)."""
        return self.model_dump(mode="json", exclude_unset=True)


class TaskStart(Event):
    event: Literal["task_start"] = "task_start"
    task: dict[str, Any] = Field(default_factory=dict)  # Task without its payload
    config: dict[str, Any] = Field(default_factory=dict)  # RunConfig dump + {"policy": describe()}
    environment: dict[str, Any] = Field(default_factory=dict)  # {"name": ..., **env.describe()}
    models: dict[str, Any] | None = None  # what actually ran: {orchestrator: {name, spec}, workers: {k: {name, spec}}}


class LLMCallEvent(Event):
    event: Literal["llm_call"] = "llm_call"
    role: str
    model: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    response: str | None = None  # None: the call failed (see error)
    usage: dict[str, int | None] = Field(default_factory=dict)  # input, output[, cached_input]
    cost_usd: float | None = None  # None: unknown price
    latency_ms: float | None = None
    component: str = "other"  # orchestration | communication | execution | judge | user | attribution …
    error: str | None = None
    retries: list[dict[str, Any]] = Field(default_factory=list)
    decision: str | None = None  # orchestrator calls: the action chosen (None: invalid reply)
    action: str | None = None  # worker calls: the tool or report type
    hint_slot: dict[str, int] | None = None
    handoff: dict[str, Any] | None = None
    template: str | None = None
    # what the provider said (absent when the backend does not say it)
    finish_reason: str | None = None  # stop | length | …: a reply cut at the length limit is visible
    response_id: str | None = None
    served_model: str | None = None  # the model name the server reports, not the porchestra spec
    response_format: str | None = None  # structured-output mode that answered: json_schema | json_object | none …
    response_format_fallback: list[dict[str, Any]] = Field(default_factory=list)  # each step-down and why
    error_status: int | None = None  # failed call: the provider's HTTP status, when there was one


class DelegateEvent(Event):
    event: Literal["delegate"] = "delegate"
    harness: dict[str, Any]  # subgoal, context, tools, step_budget, model, constraints
    model_name: str | None = None
    replaces: str | None = None  # executor replacement: the worker this one replaces
    reasoning: str = ""
    parent: str | None = None  # the worker whose report led to this delegation
    lineage: str | None = None  # decompose | replace


class ToolCallEvent(Event):
    event: Literal["tool_call"] = "tool_call"
    tool: str
    args: Any = None
    ok: bool
    output: dict[str, Any] | str | None = None  # {text, length, truncated}
    error: str | None = None
    refused: bool = False  # the tool is not in the worker's harness (never dispatched)


class ReportEvent(Event):
    event: Literal["report"] = "report"
    type: Literal["finish", "revise", "stop"]
    state: str = ""
    request: str = ""
    reason: str = ""
    task_scope: dict[str, Any] = Field(default_factory=dict)
    resource: dict[str, Any] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)
    memory: str = ""


class ReviseEvent(Event):
    event: Literal["revise"] = "revise"
    revision: dict[str, Any] = Field(default_factory=dict)  # the revise_task decision as given
    harness: dict[str, Any] = Field(default_factory=dict)  # the harness after the revision
    harness_before: dict[str, Any] = Field(default_factory=dict)
    ignored: list[str] = Field(default_factory=list)  # dimensions refused by ablation


class TerminateEvent(Event):
    event: Literal["terminate"] = "terminate"
    reason: str = ""
    by: str = "runtime"  # orchestrator | runtime


class FormatErrorEvent(Event):
    event: Literal["format_error"] = "format_error"
    raw: str | None = None
    error: str = ""


class FaultEvent(Event):
    event: Literal["fault"] = "fault"
    fault_id: str | int | None = None
    type: str
    target: str | None = None
    trigger: str | None = None
    phase: str | None = None  # activate | hit
    at: int | None = None
    tool: str | None = None
    error: str | None = None


class CompleteEvent(Event):
    event: Literal["complete"] = "complete"
    action: str | None = None  # the environment's end action (complete, finalize_task, submit, a plugin's own)
    reasoning: str = ""
    answer: str | None = None
    message: str | None = None
    submission: str | None = None


class NotificationEvent(Event):
    event: Literal["notification"] = "notification"
    text: str = ""


class PlanEvent(Event):
    event: Literal["plan"] = "plan"
    subtasks: list[dict[str, Any]] = Field(default_factory=list)  # offline mode: the whole plan


class DraftEvent(Event):
    """autoagents/skill-mas: a drafting stage's output, before the plan is fixed."""
    event: Literal["draft"] = "draft"
    stage: str = ""
    subtasks: list[dict[str, Any]] = Field(default_factory=list)


class ImplementEvent(Event):
    """mas2: the Implementer's model backbone per workflow node."""
    event: Literal["implement"] = "implement"
    assignments: list[str] = Field(default_factory=list)
    llm_call: bool = False  # False: one worker model configured, assigned without a call


class RectifyEvent(Event):
    """mas2: the Rectifier was called because a predefined condition fired."""
    event: Literal["rectify"] = "rectify"
    condition: str = ""
    worker: str | None = None
    decision: str | None = None


class SelectEvent(Event):
    """orchestra-o1 / mas2 on SWE-bench: the candidate chosen after a round."""
    event: Literal["select"] = "select"
    chosen: str | None = None
    reasoning: str = ""
    llm_call: bool = False
    candidates: list[dict[str, Any]] = Field(default_factory=list)


class RunawayEvent(Event):
    """An agent repeated the same action with the same outcome (warned, or ended when `ended`)."""
    event: Literal["runaway"] = "runaway"
    action: str = ""
    repeats: int = 0
    ended: bool = False


class TaskEnd(Event):
    event: Literal["task_end"] = "task_end"
    success: bool | None = None
    score: float | None = None
    reason: str = ""
    check: str | None = None
    check_details: dict[str, Any] = Field(default_factory=dict)
    totals: dict[str, Any] = Field(default_factory=dict)
    infra_error: bool = False  # the run ended on an infrastructure failure (model API, checker crash)


EVENT_MODELS: dict[str, type[Event]] = {
    m.model_fields["event"].default: m
    for m in (TaskStart, LLMCallEvent, DelegateEvent, ToolCallEvent, ReportEvent, ReviseEvent, TerminateEvent,
              FormatErrorEvent, FaultEvent, CompleteEvent, NotificationEvent, PlanEvent, DraftEvent,
              ImplementEvent, RectifyEvent, SelectEvent, RunawayEvent, TaskEnd)
}


def parse_event(data: dict[str, Any]) -> Event:
    """The typed event for one decoded line (pydantic.ValidationError when it does not fit)."""
    kind = data.get("event") if isinstance(data, dict) else None
    return EVENT_MODELS.get(kind, Event).model_validate(data)


def _describe(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}" for err in e.errors())


def iter_events(path: str | Path, strict: bool = False) -> Iterator[Event]:
    """Typed events of a log, in order. A torn last line (a killed writer) is skipped unless
    `strict`; any other bad line raises :class:`EventError` naming `file:line`."""
    p = Path(path)
    lines = p.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if strict or any(rest.strip() for rest in lines[i + 1:]):
                raise EventError(f"{p}:{i + 1}: corrupt event line (not JSON)") from None
            return
        try:
            yield parse_event(data)
        except ValidationError as e:
            kind = data.get("event") if isinstance(data, dict) else None
            raise EventError(f"{p}:{i + 1}: invalid {kind or 'event'} event: {_describe(e)}") from None


def read_events(path: str | Path, strict: bool = False) -> list[Event]:
    """Every event of an event log as its typed model (see :func:`iter_events`)."""
    return list(iter_events(path, strict))
