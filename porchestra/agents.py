"""The two kinds of agent turns: a worker step and an orchestrator decision.

A worker keeps one linear message history for its whole life; revisions are appended to it as
communication observations, so the same worker resumes with everything it had. The orchestrator's
context is re-rendered from the runtime state at every decision (paper Appendix F), which is also the
exact context x_t that OPOD trains on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .context import AgentFailed, RunContext, ask_until_valid
from .log.events import truncate
from .models.base import Model
from .parsing import FormatError
from .protocol import Decision, Handoff, Harness, Report, ToolCall
from .runtime_view import tools_text
from .schemas import orchestrator_schema, worker_schema
from .tools.base import ToolResult

__all__ = ["AgentFailed", "Orchestrator", "StepRecord", "Worker", "tools_text"]


@dataclass
class StepRecord:
    worker_id: str
    step: int
    tool: str | None
    ok: bool
    error: str | None = None
    refused: bool = False
    format_error: bool = False


@dataclass
class Worker:
    id: str
    harness: Harness
    model: Model
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps_used: int = 0
    status: str = "running"  # running | paused | finished | stopped | terminated
    format_errors: int = 0
    recent: list[StepRecord] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return self.harness.step_budget - self.steps_used

    @property
    def live(self) -> bool:
        return self.status in ("running", "paused")

    def view(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "harness": self.harness.model_dump(),
                "steps_used": self.steps_used, "remaining": self.remaining}

    def append_user(self, text: str) -> None:
        """Observations go into the next user turn; consecutive user texts are merged."""
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1] = {"role": "user", "content": self.messages[-1]["content"] + "\n\n" + text}
        else:
            self.messages.append({"role": "user", "content": text})

    # --- one step ------------------------------------------------------------------------------
    def step(self, rt: RunContext) -> Handoff | StepRecord:
        """One worker turn: a tool call (returns its StepRecord) or a report (returns a Handoff).
        `rt` is the run's narrow context (porchestra.context), not the runtime."""
        step = rt.log.next_step()
        self.steps_used += 1
        tools = rt.tools_of(self)
        comm = sorted(rt.policy.comm_actions, key=["finish", "revise", "stop"].index)
        call = rt.gateway.call(self.model, list(self.messages), role="worker", agent_id=self.id,
                               parent_agent_id="orchestrator", defer=True,
                               schema=worker_schema(tools, comm, rt.ablate))
        try:
            own = rt.policy.parse_worker  # a baseline with its own action format (mini-swe)
            action = own(rt, call.text, set(comm)) if own else rt.env.parse_worker_output(call.text, set(comm))
        except FormatError as e:
            rt.gateway.record(call, "execution", action=None)
            rt.log.emit("format_error", self.id, "orchestrator", raw=call.text, error=str(e))
            self.format_errors += 1
            self.messages.append({"role": "assistant", "content": call.text})
            self.append_user(rt.prompts.render("format_error.j2", error=str(e), consecutive=self.format_errors,
                                               limit=rt.cfg.budgets.max_format_errors))
            if self.format_errors >= rt.cfg.budgets.max_format_errors:
                return Handoff(worker_id=self.id, kind="error",
                               detail=f"{self.format_errors} consecutive malformed replies; last: {e}")
            return StepRecord(self.id, step, None, False, str(e), format_error=True)
        self.format_errors = 0
        self.messages.append({"role": "assistant", "content": call.text})
        if isinstance(action, Report):
            rt.gateway.record(call, "communication" if action.type == "revise" else "execution",
                              action=action.type)
            action = rt.strip_ablated(action)
            self.reports.append(action)
            rt.log.emit("report", self.id, "orchestrator", type=action.type, state=action.state,
                        request=action.request, reason=action.reason,
                        task_scope=action.task_scope.model_dump(), resource=action.resource.model_dump(),
                        evidence=action.evidence.model_dump(), memory=action.memory)
            return Handoff(worker_id=self.id, kind="report", report=action)
        rt.gateway.record(call, "execution", action=action.tool)
        return self._run_tool(rt, action, step)

    def _run_tool(self, rt: RunContext, call: ToolCall, step: int) -> StepRecord:
        refused = call.tool not in self.harness.tools
        if refused:
            known = call.tool in rt.tool_names()
            why = "is not in your harness" if known else "does not exist"
            result = ToolResult(False, error=f"tool {call.tool!r} {why}; your tools: {', '.join(self.harness.tools)}")
        else:
            result = rt.dispatch(call, self)
        limit = rt.cfg.max_output_chars
        rt.log.emit("tool_call", self.id, "orchestrator", tool=call.tool, args=call.args, ok=result.ok,
                    output=truncate(result.output, limit), error=result.error, refused=refused)
        notes = rt.poll_notifications(self)
        warn = rt.cfg.budgets.warn_at
        self.append_user(rt.prompts.render(
            "observation.j2", steps_used=self.steps_used, budget=self.harness.step_budget, tool=call.tool,
            result={"ok": result.ok, "output": result.output[:limit], "error": result.error},
            notifications=notes, warning=0 < self.remaining <= warn, remaining=self.remaining,
            can_revise="revise" in rt.policy.comm_actions))
        record = StepRecord(self.id, step, call.tool, result.ok, result.error, refused)
        self.recent = (self.recent + [record])[-10:]
        return record


class Orchestrator:
    def __init__(self, model: Model):
        self.model = model

    def decide(self, ctx: RunContext, handoff: Handoff | None, allowed: list[str],
               validate: Callable[[Decision], Any]) -> tuple[Decision, Any]:
        """Ask the model until it returns a decision that parses and validates (or K errors), with the
        orchestrator prompt re-rendered from the run state at every attempt."""
        component = ("communication" if handoff is not None and handoff.report is not None
                     and handoff.report.type == "revise" else "orchestration")
        schema = orchestrator_schema(allowed, ctx.tool_names(), list(ctx.cfg.worker_model_names()), ctx.env.end_action,
                                     worker_ids=[w.id for w in ctx.workers.values() if w.status == "paused"],
                                     end_field=ctx.env.end_field)
        handoff_info = None if handoff is None else {
            "worker_id": handoff.worker_id, "kind": handoff.kind,
            "report_type": handoff.report.type if handoff.report else None}

        def build() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            messages, slot = ctx.prompts.orchestrator_messages(**ctx.orchestrator_vars(handoff, allowed))
            return messages, {"hint_slot": slot, "handoff": handoff_info}

        return ask_until_valid(ctx, self.model, build, allowed, validate, component, schema=schema)
