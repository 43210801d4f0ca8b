"""Helpers for policy/fault tests: a routed scripted model (deterministic replies per worker even
when workers run on threads) and small queries over event logs."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

from porchestra.models.base import Completion, Usage


class RoutedModel:
    """Replies chosen by a key found in the prompt: `routes` maps a substring of the conversation
    (e.g. a worker's subgoal) to its own reply list; each list is consumed in order."""

    def __init__(self, routes: dict[str, list[str]] | Callable[[list[dict]], str], name: str = "scripted:routed"):
        self.name = name
        self.routes = {k: list(v) for k, v in routes.items()} if isinstance(routes, dict) else None
        self.fn = routes if callable(routes) else None
        self._lock = threading.Lock()
        self.calls: list[list[dict[str, Any]]] = []

    def complete(self, messages, *, schema=None, max_tokens=None) -> Completion:
        with self._lock:
            self.calls.append(messages)
            if self.fn is not None:
                text = self.fn(messages)
            else:
                blob = "\n".join(str(m.get("content", "")) for m in messages[:2])
                key = next((k for k in self.routes if k in blob), None)
                if key is None or not self.routes[key]:
                    raise AssertionError(f"no scripted reply for prompt: {blob[:300]}")
                text = self.routes[key].pop(0)
        return Completion(text=text, usage=Usage(100, 10))


def of(events: list[dict], kind: str, **match: Any) -> list[dict]:
    return [e for e in events if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def orch_calls(events: list[dict]) -> list[dict]:
    return of(events, "llm_call", role="orchestrator")


def delegate_batch(*tasks: tuple[str, list[str]]) -> str:
    return json.dumps({"action": "delegate_tasks", "reasoning": "round", "params": {"tasks": [
        {"task_instruction": t, "context": "", "tools": tools} for t, tools in tasks]}})


def noop_revise() -> str:
    return json.dumps({"action": "revise_task", "reasoning": "continue", "params": {
        "task_scope": {"operation": "keep", "object": "", "details": ""},
        "resource": {"operation": "keep", "object": "none", "details": ""}}})


def wait() -> str:
    return json.dumps({"action": "wait", "reasoning": "others still running"})
