"""Deterministic test models: `scripted:<path>` (a JSON list of raw replies, one file per role) and
`replay:<events.jsonl>` (the replies of a recorded run, per role, in order)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable

from .base import Completion, Message, ModelExhausted, Usage, count_tokens_approx


class ScriptedModel:
    """Returns the given replies in order; running out raises :class:`ModelExhausted`.

    A reply may be a string, or an object `{"text": ..., "usage": {...}}` to script token counts.
    """

    def __init__(self, replies: Iterable[Any], name: str = "scripted:inline"):
        self.name = name
        self._replies = list(replies)
        self._i = 0
        self._lock = threading.Lock()
        self.calls: list[list[Message]] = []  # what the model was asked (tests inspect it)

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedModel":
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"scripted model file not found: {p}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"scripted model file {p} is not valid JSON: {e}") from None
        if not isinstance(data, list):
            raise ValueError(f"scripted model file {p} must hold a JSON list of reply strings")
        return cls(data, name=f"scripted:{p.name}")

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._i

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        with self._lock:
            self.calls.append(messages)
            if self._i >= len(self._replies):
                raise ModelExhausted(f"{self.name} has no replies left (it had {len(self._replies)})")
            reply = self._replies[self._i]
            self._i += 1
        if isinstance(reply, dict):
            text = reply.get("text", "")
            u = reply.get("usage") or {}
            usage = Usage(int(u.get("input", 0)), int(u.get("output", 0)), u.get("cached_input"))
        else:
            text = reply if isinstance(reply, str) else json.dumps(reply)
            prompt = "".join(str(m.get("content", "")) for m in messages)
            usage = Usage(count_tokens_approx(prompt), count_tokens_approx(text))
        return Completion(text=text, usage=usage)


def replay_model(path: str | Path, role: str) -> ScriptedModel:
    """The `role`'s recorded replies of an event log, as a scripted model."""
    from ..log.events import read_events

    events = read_events(path)
    replies = [{"text": e.get("response") or "", "usage": e.get("usage") or {}}
               for e in events if e.get("event") == "llm_call" and e.get("role") == role
               and e.get("response") is not None]
    return ScriptedModel(replies, name=f"replay:{Path(path).name}")
