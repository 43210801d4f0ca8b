"""Reading run directories into episodes: one events.jsonl = one (task, trial) episode.

A RUN_DIR may be a single run (RUN_DIR/events.jsonl) or an eval directory
(RUN_DIR/tasks/<task>__t<trial>__<hash>/events.jsonl); every events.jsonl below it is read. A
RUN_DIR is one *configuration*; its label is the directory name unless given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..log.events import read_events
from ..log.trajectory import find_event_logs


@dataclass
class Episode:
    path: Path
    label: str
    task_id: str
    events: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)
    end: dict[str, Any] | None = None

    @property
    def success(self) -> bool | None:
        return None if self.end is None else self.end.get("success")

    @property
    def totals(self) -> dict[str, Any]:
        return (self.end or {}).get("totals") or {}

    @property
    def mode(self) -> str:
        return str(self.config.get("mode", "?"))

    @property
    def faults(self) -> list[dict[str, Any]]:
        return list(self.config.get("faults") or [])

    @property
    def ablate(self) -> list[str]:
        return list(self.config.get("ablate") or [])

    @property
    def metadata(self) -> dict[str, Any]:
        return self.task.get("metadata") or {}

    def env_actions(self) -> int:
        """Environment actions = tool calls that reached the environment (refusals excluded)."""
        return sum(1 for e in self.events if e["event"] == "tool_call" and not e.get("refused"))


def load_episode(path: Path, label: str) -> Episode:
    events = read_events(path)
    start = next((e for e in events if e["event"] == "task_start"), {})
    end = next((e for e in reversed(events) if e["event"] == "task_end"), None)
    task_id = str(start.get("task_id") or (events[0]["task_id"] if events else path.parent.name))
    return Episode(path, label, task_id, events, start.get("config") or {}, start.get("task") or {}, end)


def load_run(run_dir: str | Path, label: str | None = None) -> list[Episode]:
    root = Path(run_dir)
    paths = find_event_logs(root)
    name = label or (root.parent.name if root.is_file() else root.name)
    return [load_episode(p, name) for p in paths]


def by_label(episodes: list[Episode]) -> dict[str, list[Episode]]:
    out: dict[str, list[Episode]] = {}
    for ep in episodes:
        out.setdefault(ep.label, []).append(ep)
    return out
