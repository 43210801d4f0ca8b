"""Event log v1 (docs/events.md): one JSON object per line, flushed after every event.

The writer is the single place where secrets are redacted: every line passes through
:class:`porchestra.secrets.Redactor` before it reaches the file or any listener (the console). Every
event is checked against its typed model (:mod:`porchestra.log.schema`) before it is written, so
the log never holds a line its readers cannot read.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ..secrets import Redactor
from .schema import EVENT_LOG_VERSION, Event, EventError, parse_event

__all__ = ["EVENT_LOG_VERSION", "Event", "EventError", "EventLog", "Listener", "read_events", "truncate"]

Listener = Callable[[dict[str, Any]], None]


def truncate(text: str, limit: int) -> dict[str, Any]:
    """Tool output as logged: the text (cut to `limit` characters) with its original length."""
    text = text if isinstance(text, str) else str(text)
    return {"text": text[:limit], "length": len(text), "truncated": len(text) > limit}


class EventLog:
    """Appends events for one (run, task) to `path`. Thread-safe; steps are global and monotonic."""

    def __init__(self, path: str | Path, run_id: str, task_id: str, redactor: Redactor | None = None,
                 listeners: list[Listener] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self.task_id = task_id
        self.redactor = redactor or Redactor()
        self.listeners = list(listeners or [])
        self._lock = threading.Lock()
        self._step = 0
        self.repaired_bytes = _cut_torn_tail(self.path)
        # backslashreplace: a lone surrogate (legal in a model reply decoded from JSON) is written as
        # its JSON escape instead of crashing the run; reading the line back gives the same text
        self._fh = self.path.open("a", encoding="utf-8", errors="backslashreplace")
        self.events: list[dict[str, Any]] = []  # in-memory copy for totals and the loop

    @property
    def step(self) -> int:
        return self._step

    def next_step(self) -> int:
        """Advance the global step (one agent turn) and return it."""
        with self._lock:
            self._step += 1
            return self._step

    def emit(self, event: str, agent_id: str = "orchestrator", parent_agent_id: str | None = None,
             **fields: Any) -> dict[str, Any]:
        record = {
            "v": EVENT_LOG_VERSION,
            "ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "run_id": self.run_id,
            "task_id": self.task_id,
            "step": self._step,
            "agent_id": agent_id,
            "parent_agent_id": parent_agent_id,
            "event": event,
            **fields,
        }
        line = self.redactor.redact_text(json.dumps(record, ensure_ascii=False, default=str))
        record = json.loads(line)
        try:
            parse_event(record)
        except ValidationError as e:  # a bug in the emitting code, never in the input
            raise TypeError(f"event {event!r} does not fit its schema (porchestra/log/schema.py): {e}") from None
        with self._lock:
            if self._fh.closed:
                raise RuntimeError(f"event log {self.path} is closed")
            self._fh.write(line + "\n")
            self._fh.flush()
            self.events.append(record)
        for listener in self.listeners:
            try:
                listener(record)
            except Exception:  # a broken console must never break the run
                pass
        return record

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> int:
    """A writer killed mid-line leaves a partial last line; appending after it would merge it with the
    next event. Cut it off before appending (as results.jsonl does); return how many bytes went."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(end)
    return len(data) - end


def read_events(path: str | Path, strict: bool = False) -> list[Event]:
    """Read an event log as typed events (:mod:`porchestra.log.schema`). A partially written last
    line (a killed writer) is dropped; with `strict` any bad line raises. A bad line raises
    :class:`EventError` (a ValueError) naming `file:line`."""
    from .schema import read_events as typed

    return typed(path, strict)
