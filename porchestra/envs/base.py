"""The Environment interface: what a benchmark provides to the one loop.

A benchmark is an Environment subclass plus a prompt-template directory. The loop never asks which
benchmark it runs; everything benchmark-specific is a method or attribute here.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from pydantic import BaseModel, Field

from ..parsing import parse_worker
from ..protocol import EndTask, Report, ToolCall
from ..tools.base import Tool, ToolResult


class Task(BaseModel):
    """One task instance. `payload` holds benchmark-specific data (never shown to agents as is)."""

    id: str
    instruction: str
    category: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    payload: dict[str, Any] = Field(default_factory=dict)


class Score(BaseModel):
    success: bool | None  # None: not scored (no checker, or the run ended before an answer)
    score: float | None = None
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class Environment:
    """Base class with sensible no-op defaults; subclasses override what their benchmark needs."""

    name: str = "base"
    prompt_set: str = "general"  # directory under porchestra/prompts (or an absolute path)
    # how workers write their actions: a built-in wrapper (json | thought_action | discussion_command);
    # a benchmark with its own format overrides `parse_worker_output` instead
    worker_format: str = "json"
    end_action: str = "complete"  # the orchestrator's end action in this benchmark's prompt
    end_field: str = "answer"  # the end action's `params` field that carries its value (answer, message, ...)
    default_budgets: dict[str, int] = {}  # e.g. {"global_steps": 500, "worker_steps": 50}

    # --- lifecycle -----------------------------------------------------------------------------
    def reset(self, task: Task) -> None:
        """Prepare a fresh instance of `task` (workspace, app state, ...)."""

    def close(self) -> None:
        """Release processes and temporary files. Called exactly once per reset."""

    # --- tools ---------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        """Every tool the orchestrator may assign to workers (Ω ⊆ these)."""
        return []

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        """Run one tool call. The runtime has already checked that the tool is in the harness."""
        by_name = {t.name: t for t in self.tools()}
        if call.tool not in by_name:
            return ToolResult(False, error=f"unknown tool {call.tool!r}")
        return by_name[call.tool].run(call.args)

    # --- dynamics ------------------------------------------------------------------------------
    def notifications(self) -> list[str]:
        """Exogenous events (new user messages, environment notifications) since the last poll."""
        return []

    def is_stopped(self) -> bool:
        """True once the environment itself has ended the episode (e.g. ARE's ENVIRONMENT_STOP)."""
        return False

    @contextlib.contextmanager
    def thinking(self) -> Iterator[None]:
        """Wraps every LLM call: simulated-time environments pause their clock here."""
        yield

    def on_delegate(self, worker_id: str, fresh_attempt: bool) -> None:
        """A new worker starts. `fresh_attempt`: the benchmark's notion of a clean attempt
        (SWE-bench: a new container) — revisions and executor replacement never pass True."""

    def parse_worker_output(self, text: str, comm_actions: set[str]) -> ToolCall | Report:
        """A worker's reply → its tool call or report; raise porchestra.parsing.FormatError (its
        message is shown to the worker) when the reply is not a valid action in this benchmark's format."""
        return parse_worker(text, comm_actions, self.worker_format)

    def end_decision(self, value: str | None, reasoning: str = "") -> EndTask:
        """This environment's end action carrying `value` (for policies that end a task themselves)."""
        return EndTask.model_validate({"action": self.end_action, "reasoning": reasoning, self.end_field: value or ""})

    def end_value(self, end: EndTask | None) -> str | None:
        """The value of an end action (the run's answer)."""
        return None if end is None else end.value(self.end_field)

    def end_turn(self, end: EndTask) -> str | None:
        """The orchestrator ended the turn. Return the next user message to continue a multi-turn
        task, or None when the task is over."""
        return None

    def describe(self) -> dict[str, Any]:
        """Facts about this environment instance worth recording in `task_start` (e.g. the sandbox's
        isolation level)."""
        return {}

    def bind_gateway(self, gateway: Any) -> None:
        """Called once per task with the task's model Gateway, so environment-side LLM calls (an LLM
        judge, a user simulator) go through the one model layer and land in the event log."""

    # --- scoring -------------------------------------------------------------------------------
    def evaluate(self, end: EndTask | None) -> Score:
        """Score the finished episode. `end` is None when the run ended without an end action."""
        return Score(success=None, reason="this environment has no checker")

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        """The task's reference actions and end action, replayed through the tool layer by the
        `gold` policy to prove adapter and checker wiring without an LLM. None: no reference."""
        return None

    # --- prompt material -----------------------------------------------------------------------
    def prompt_vars(self) -> dict[str, Any]:
        """Extra variables for this benchmark's templates (attachments, repository metadata...)."""
        return {}
