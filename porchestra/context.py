"""What control policies and agents may see of a running task, and the few things they may ask for.

The runtime (porchestra/loop.py) owns every piece of task state. Policies and agents get a
:class:`RunContext` instead of the runtime: read-only views of the task, the budgets, the workers and
the log, plus a short list of operations (ask the orchestrator, validate a decision into an effect,
call a model through the gateway, dispatch a tool call, emit an event). Starting, revising and closing
workers happens only in the runtime, by executing the :mod:`porchestra.effects` a decision validated to.

This module imports nothing of the loop, the agents or the policies, so they can all depend on it
without a cycle.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

from .config import RunConfig
from .envs.base import Task
from .harness import DecisionError
from .parsing import FormatError, parse_decision
from .protocol import Decision, Handoff, Harness, Report, ToolCall
from .tools.base import Tool, ToolResult


class AgentFailed(Exception):
    """An agent could not go on (e.g. K consecutive malformed replies); the message says why."""


class WorkerView(Protocol):
    """A worker as the context shows it (porchestra.agents.Worker satisfies this)."""

    id: str
    harness: Harness
    status: str
    steps_used: int
    reports: list[Report]

    @property
    def remaining(self) -> int: ...

    @property
    def live(self) -> bool: ...

    def view(self) -> dict[str, Any]: ...


class EnvView:
    """The environment facts a policy or agent may use (not its lifecycle: reset, evaluate, close)."""

    def __init__(self, env: Any):
        self._env = env

    @property
    def name(self) -> str:
        return self._env.name

    @property
    def end_action(self) -> str:
        return self._env.end_action

    @property
    def end_field(self) -> str:
        return self._env.end_field

    @property
    def worker_format(self) -> Any:
        return self._env.worker_format

    def parse_worker_output(self, text: str, comm_actions: set[str]) -> Any:
        return self._env.parse_worker_output(text, comm_actions)

    def end_decision(self, value: str | None, reasoning: str = "") -> Any:
        return self._env.end_decision(value, reasoning)

    def prompt_vars(self) -> dict[str, Any]:
        return self._env.prompt_vars()


class LogView:
    """The event log: the global step, the events so far (read-only), and emitting new ones."""

    def __init__(self, log: Any):
        self._log = log

    @property
    def step(self) -> int:
        return self._log.step

    @property
    def events(self) -> tuple[dict[str, Any], ...]:
        return tuple(self._log.events)

    def next_step(self) -> int:
        return self._log.next_step()

    def emit(self, event: str, agent_id: str = "orchestrator", parent_agent_id: str | None = None,
             **fields: Any) -> dict[str, Any]:
        return self._log.emit(event, agent_id, parent_agent_id, **fields)


class RunContext:
    """The narrow view of one task run handed to control policies and agents."""

    def __init__(self, rt: Any):
        self._rt = rt
        self.task: Task = rt.task
        self.cfg: RunConfig = rt.cfg
        self.env = EnvView(rt.env)
        self.log = LogView(rt.log)
        self.ablate = rt.ablate  # an ablation.Ablation (a frozenset of names)

    # --- reads -----------------------------------------------------------------------------------
    @property
    def policy(self) -> Any:
        """The active control policy (its comm actions and hooks)."""
        return self._rt.policy

    @property
    def policy_state(self) -> dict[str, Any]:
        """The policy's own per-task state (plans, rounds); the one thing here a policy may change."""
        return self._rt.policy_state

    @property
    def prompts(self) -> Any:
        return self._rt.prompts

    @property
    def gateway(self) -> Any:
        """Every model call goes through it (and into the event log)."""
        return self._rt.gateway

    @property
    def workers(self) -> Mapping[str, WorkerView]:
        return MappingProxyType(self._rt.workers)

    @property
    def updates(self) -> tuple[str, ...]:
        """Exogenous updates so far (notifications, new user messages), oldest first."""
        return tuple(self._rt.updates)

    @property
    def memory(self) -> tuple[str, ...]:
        return tuple(self._rt.memory)

    @property
    def pending(self) -> tuple[Handoff, ...]:
        """Handoffs already queued for a decision after this one."""
        return tuple(self._rt.pending)

    @property
    def step(self) -> int:
        return self._rt.log.step

    @property
    def models(self) -> Any:
        return self._rt.models

    def all_tools(self) -> list[Tool]:
        return self._rt.all_tools()

    def tool_names(self) -> list[str]:
        return self._rt.tool_names()

    def tools_of(self, worker: WorkerView) -> list[Tool]:
        return self._rt.tools_of(worker)

    def revisable_worker(self, handoff: Handoff | None) -> WorkerView | None:
        return self._rt.revisable_worker(handoff)

    def orchestrator_vars(self, handoff: Handoff | None, allowed: list[str]) -> dict[str, Any]:
        return self._rt.orchestrator_vars(handoff, allowed)

    # --- operations ------------------------------------------------------------------------------
    def validate(self, decision: Decision, handoff: Handoff | None) -> Any:
        """Check a decision against the current state (no side effects); return its typed effect
        (porchestra.effects) or raise DecisionError saying what is wrong."""
        return self._rt.validate(decision, handoff)

    def ask_orchestrator(self, handoff: Handoff | None, allowed: list[str]) -> tuple[Decision, Any]:
        """Ask the orchestrator model (its ordinary prompt) until a valid decision; (decision, effect)."""
        return self._rt.ask_orchestrator(handoff, allowed)

    def ask_with_template(self, template: str, variables: dict[str, Any], allowed: list[str],
                          validate: Callable[[Decision], Any] | None = None,
                          component: str = "orchestration") -> tuple[Decision, Any]:
        """One orchestrator decision from a policy's own template (offline planning)."""
        messages = [{"role": "user", "content": self.prompts.render(template, **variables)}]
        return ask_until_valid(self, self._rt.models.orchestrator, lambda: (messages, {}), allowed,
                               validate or (lambda d: self.validate(d, None)), component,
                               call_fields={"template": template})

    def check_global_budget(self) -> None:
        self._rt.check_global_budget()

    def dispatch(self, call: ToolCall, worker: WorkerView) -> ToolResult:
        return self._rt.dispatch(call, worker)

    def poll_notifications(self, worker: WorkerView | None) -> list[str]:
        return self._rt.poll_notifications(worker)

    def strip_ablated(self, report: Report) -> Report:
        return self._rt.strip_ablated(report)


def ask_until_valid(ctx: RunContext, model: Any, build: Callable[[], tuple[list[dict[str, Any]], dict[str, Any]]],
                    allowed: list[str], validate: Callable[[Decision], Any], component: str, *,
                    schema: dict[str, Any] | None = None, call_fields: dict[str, Any] | None = None
                    ) -> tuple[Decision, Any]:
    """The one ask-until-valid loop of the orchestrator: call the model, parse the reply into an allowed
    decision and validate it; on a malformed or invalid reply, log a format_error, show the model its
    reply and the error, and ask again — at most `max_format_errors` times in a row (AgentFailed).

    `build()` returns the messages of an attempt (re-rendered each time: progress changes) and the
    extra fields its llm_call event records (hint slot, handoff)."""
    limit = ctx.cfg.budgets.max_format_errors
    corrections: list[dict[str, Any]] = []
    errors = 0
    while True:
        ctx.check_global_budget()
        ctx.log.next_step()
        messages, record_fields = build()
        call = ctx.gateway.call(model, list(messages) + corrections, role="orchestrator", agent_id="orchestrator",
                                defer=True, schema=schema, **(call_fields or {}))
        try:
            decision = parse_decision(call.text, set(allowed), (ctx.env.end_action,))
            effect = validate(decision)
        except (FormatError, DecisionError) as e:
            ctx.gateway.record(call, component, decision=None, **record_fields)
            ctx.log.emit("format_error", "orchestrator", None, raw=call.text, error=str(e))
            errors += 1
            if errors >= limit:
                raise AgentFailed(f"orchestrator: {errors} consecutive invalid replies; last: {e}") from None
            corrections = [{"role": "assistant", "content": call.text},
                           {"role": "user", "content": ctx.prompts.render(
                               "format_error.j2", error=str(e), consecutive=errors, limit=limit)}]
            continue
        ctx.gateway.record(call, component, decision=decision.action, **record_fields)
        return decision, effect
