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


@dataclass
class DecisionRecord:
    step: int
    action: str | None  # None: a malformed reply (a format_error follows)
    messages: list[dict[str, Any]]
    response: str
    hint_slot: dict[str, int] | None
    handoff: dict[str, Any] | None
    effect: dict[str, Any] | None = None  # the delegate / revise / terminate / complete event it caused
    target: str | None = None  # the worker it created, revised or ended
    llm_call: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentTrajectory:
    agent_id: str
    harness: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)  # tool_call / report / revise / format_error …
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None  # terminate event, or the final report

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The worker's linear history as its last model call saw it, plus that call's reply."""
        if not self.llm_calls:
            return []
        last = self.llm_calls[-1]
        return list(last["messages"]) + [{"role": "assistant", "content": last.get("response") or ""}]


@dataclass
class Run:
    path: Path
    events: list[dict[str, Any]]
    task: dict[str, Any]
    config: dict[str, Any]
    decisions: list[DecisionRecord]
    agents: dict[str, AgentTrajectory]
    end: dict[str, Any] | None

    @property
    def success(self) -> bool | None:
        return None if self.end is None else self.end.get("success")


EFFECTS = ("delegate", "revise", "terminate", "complete")


def build_run(events: list[dict[str, Any]], path: Path | str = "") -> Run:
    start = next((e for e in events if e["event"] == "task_start"), {})
    decisions: list[DecisionRecord] = []
    agents: dict[str, AgentTrajectory] = {}
    pending: DecisionRecord | None = None

    def agent(aid: str) -> AgentTrajectory:
        return agents.setdefault(aid, AgentTrajectory(aid))

    for e in events:
        kind, aid = e["event"], e["agent_id"]
        if kind == "llm_call" and e.get("role") == "orchestrator":
            pending = DecisionRecord(e["step"], e.get("decision"), e["messages"], e.get("response") or "",
                                     e.get("hint_slot"), e.get("handoff"), llm_call=e)
            decisions.append(pending)
        elif kind in EFFECTS and e.get("parent_agent_id") in ("orchestrator", None) and pending is not None \
                and pending.effect is None and (kind != "terminate" or e.get("by") == "orchestrator"):
            pending.effect, pending.target = e, (None if kind == "complete" else aid)
        if kind == "llm_call" and aid != "orchestrator" and e.get("role") == "worker":
            agent(aid).llm_calls.append(e)
        elif kind == "delegate":
            agent(aid).harness = e["harness"]
        elif kind in ("tool_call", "report", "revise", "format_error", "notification", "fault") and aid != "orchestrator":
            agent(aid).steps.append(e)
            if kind == "revise":
                agent(aid).harness = e["harness"]
        if kind == "terminate" or (kind == "report" and e.get("type") in ("finish", "stop")):
            agent(aid).end = e
    end = next((e for e in reversed(events) if e["event"] == "task_end"), None)
    return Run(Path(path), events, start.get("task", {}), start.get("config", {}), decisions, agents, end)


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
