"""Rebuild trajectories and the decision sequence from an event log (the single source of truth).

    run = load_run("runs/x/events.jsonl")
    run.decisions          # orchestrator decisions in order, each with its exact context and effect
    run.agents["worker-1"] # that worker's steps: tool calls, reports, revisions received, its end
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .events import read_events
from .schema import (DelegateEvent, Event, LLMCallEvent, ReportEvent, ReviseEvent, TaskEnd, TaskStart,
                     TerminateEvent, parse_event)


@dataclass
class DecisionRecord:
    step: int
    action: str | None  # None: a malformed reply (a format_error follows)
    messages: list[dict[str, Any]]
    response: str
    hint_slot: dict[str, int] | None
    handoff: dict[str, Any] | None
    effect: Event | None = None  # the delegate / revise / terminate / complete event it caused
    target: str | None = None  # the worker it created, revised or ended
    llm_call: LLMCallEvent | None = None


@dataclass
class AgentTrajectory:
    agent_id: str
    harness: dict[str, Any] | None = None
    steps: list[Event] = field(default_factory=list)  # tool_call / report / revise / format_error …
    llm_calls: list[LLMCallEvent] = field(default_factory=list)
    end: Event | None = None  # terminate event, or the final report

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The worker's linear history as its last model call saw it, plus that call's reply."""
        if not self.llm_calls:
            return []
        last = self.llm_calls[-1]
        return list(last.messages) + [{"role": "assistant", "content": last.response or ""}]


@dataclass
class Run:
    path: Path
    events: list[Event]
    task: dict[str, Any]
    config: dict[str, Any]
    decisions: list[DecisionRecord]
    agents: dict[str, AgentTrajectory]
    end: TaskEnd | None

    @property
    def success(self) -> bool | None:
        return None if self.end is None else self.end.success


EFFECTS = ("delegate", "revise", "terminate", "complete")


def build_run(events: list[Event | dict[str, Any]], path: Path | str = "") -> Run:
    events = [e if isinstance(e, Event) else parse_event(e) for e in events]
    start = next((e for e in events if isinstance(e, TaskStart)), None)
    decisions: list[DecisionRecord] = []
    agents: dict[str, AgentTrajectory] = {}
    pending: DecisionRecord | None = None

    def agent(aid: str) -> AgentTrajectory:
        return agents.setdefault(aid, AgentTrajectory(aid))

    for e in events:
        kind, aid = e.event, e.agent_id
        if isinstance(e, LLMCallEvent) and e.role == "orchestrator":
            pending = DecisionRecord(e.step, e.decision, e.messages, e.response or "", e.hint_slot, e.handoff,
                                     llm_call=e)
            decisions.append(pending)
        elif kind in EFFECTS and e.parent_agent_id in ("orchestrator", None) and pending is not None \
                and pending.effect is None and not (isinstance(e, TerminateEvent) and e.by != "orchestrator"):
            pending.effect, pending.target = e, (None if kind == "complete" else aid)
        if isinstance(e, LLMCallEvent) and aid != "orchestrator" and e.role == "worker":
            agent(aid).llm_calls.append(e)
        elif isinstance(e, DelegateEvent):
            agent(aid).harness = e.harness
        elif kind in ("tool_call", "report", "revise", "format_error", "notification", "fault") and aid != "orchestrator":
            agent(aid).steps.append(e)
            if isinstance(e, ReviseEvent):
                agent(aid).harness = e.harness
        if isinstance(e, TerminateEvent) or (isinstance(e, ReportEvent) and e.type in ("finish", "stop")):
            agent(aid).end = e
    end = next((e for e in reversed(events) if isinstance(e, TaskEnd)), None)
    return Run(Path(path), events, start.task if start else {}, start.config if start else {}, decisions, agents,
               end)


def load_run(path: str | Path) -> Run:
    p = Path(path)
    f = p / "events.jsonl" if p.is_dir() else p
    return build_run(read_events(f), f)


def find_event_logs(paths: list[str | Path] | str | Path) -> list[Path]:
    """The events.jsonl files of run dirs, eval dirs (searched recursively) or given directly.
    FileNotFoundError names a path that does not exist or holds no event log."""
    found: list[Path] = []
    for p in map(Path, [paths] if isinstance(paths, (str, Path)) else paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            logs = sorted(p.rglob("events.jsonl"))
            if not logs:
                raise FileNotFoundError(f"no events.jsonl under {p}")
            found.extend(logs)
        else:
            raise FileNotFoundError(f"no events.jsonl at {p}: no such file or directory")
    return found
