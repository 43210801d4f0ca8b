"""The two kinds of agent turns: a worker step and an orchestrator decision.

A worker keeps one linear message history for its whole life; revisions are appended to it as
communication observations, so the same worker resumes with everything it had. The orchestrator's
context is re-rendered from the runtime state at every decision (paper Appendix F), which is also the
exact context x_t that OPOD trains on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .harness import DecisionError
from .log.events import truncate
from .models.base import Model
from .parsing import FormatError, parse_decision, parse_worker
from .protocol import Decision, Handoff, Harness, Report, ToolCall
from .schemas import orchestrator_schema, worker_schema
from .tools.base import ToolResult, render_tools

if TYPE_CHECKING:
    from .loop import Runtime


class AgentFailed(Exception):
    """An agent could not go on (e.g. K consecutive malformed replies); the message says why."""


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
    def step(self, rt: "Runtime") -> Handoff | StepRecord:
        """One worker turn: a tool call (returns its StepRecord) or a report (returns a Handoff)."""
        step = rt.log.next_step()
        self.steps_used += 1
        tools = rt.tools_of(self)
        comm = sorted(rt.policy.comm_actions, key=["finish", "revise", "stop"].index)
        call = rt.gateway.call(self.model, list(self.messages), role="worker", agent_id=self.id,
                               parent_agent_id="orchestrator", defer=True,
                               schema=worker_schema(tools, comm, rt.ablate))
        try:
            action = parse_worker(call.text, set(comm), rt.env.worker_format)
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

    def _run_tool(self, rt: "Runtime", call: ToolCall, step: int) -> StepRecord:
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
        self.format_errors = 0

    def decide(self, rt: "Runtime", handoff: Handoff | None, allowed: list[str],
               validate: Callable[[Decision], Any]) -> tuple[Decision, Any]:
        """Ask the model until it returns a decision that parses and validates (or K errors)."""
        corrections: list[dict[str, Any]] = []
        component = ("communication" if handoff is not None and handoff.report is not None
                     and handoff.report.type == "revise" else "orchestration")
        tool_names = rt.tool_names()
        schema = orchestrator_schema(allowed, tool_names, list(rt.cfg.worker_model_names()), rt.env.end_action,
                                     worker_ids=[w.id for w in rt.workers.values() if w.status == "paused"])
        handoff_info = None if handoff is None else {
            "worker_id": handoff.worker_id, "kind": handoff.kind,
            "report_type": handoff.report.type if handoff.report else None}
        while True:
            rt.check_global_budget()
            rt.log.next_step()
            messages, slot = rt.prompts.orchestrator_messages(**rt.orchestrator_vars(handoff, allowed))
            messages += corrections
            call = rt.gateway.call(self.model, messages, role="orchestrator", agent_id="orchestrator",
                                   defer=True, schema=schema)
            try:
                decision = parse_decision(call.text, set(allowed))
                plan = validate(decision)
            except (FormatError, DecisionError) as e:
                rt.gateway.record(call, component, decision=None, hint_slot=slot, handoff=handoff_info)
                rt.log.emit("format_error", "orchestrator", None, raw=call.text, error=str(e))
                self.format_errors += 1
                if self.format_errors >= rt.cfg.budgets.max_format_errors:
                    raise AgentFailed(f"orchestrator: {self.format_errors} consecutive invalid replies; last: {e}")
                corrections = [{"role": "assistant", "content": call.text},
                               {"role": "user", "content": rt.prompts.render(
                                   "format_error.j2", error=str(e), consecutive=self.format_errors,
                                   limit=rt.cfg.budgets.max_format_errors)}]
                continue
            self.format_errors = 0
            rt.gateway.record(call, component, decision=decision.action, hint_slot=slot, handoff=handoff_info)
            return decision, plan


def tools_text(tools: list[Any]) -> str:
    return render_tools(tools) or "(none)"
