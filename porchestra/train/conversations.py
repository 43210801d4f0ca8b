"""Worker conversations as SFT examples: a worker's history is append-only (every turn's prompt is
a prefix of the next), so its last LLM call plus the reply is the whole conversation, and training it
once with every assistant turn supervised gives the same targets as one example per turn at a
fraction of the compute (docs/training.md, "Workers").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ..log.events import read_events
from .records import RecordError, find_event_logs


def worker_conversations(paths: list[str | Path]) -> Iterator[dict[str, Any]]:
    """One `messages` SFT row (metadata.all_turns = true) per worker of every run under `paths`.
    A worker whose turns are not append-only (a rewritten history) is split where it breaks."""
    for log in find_event_logs(paths):
        try:
            events = read_events(log)
        except (OSError, ValueError) as e:
            raise RecordError(f"RUN_DIR {log}: unreadable event log ({e})") from None
        end = next((e for e in reversed(events) if e.get("event") == "task_end"), {})
        chats: dict[str, list[dict[str, Any]]] = {}  # each worker's conversation so far
        done: list[tuple[str, list[dict[str, Any]]]] = []  # conversations a rewritten history ended
        for ev in events:
            if ev.get("event") != "llm_call" or ev.get("role") != "worker" or ev.get("response") is None:
                continue
            msgs = list(ev.get("messages") or [])
            agent = str(ev.get("agent_id"))
            prev = chats.get(agent)
            if prev is not None and msgs[:len(prev)] != prev:  # not a continuation: start a new one
                done.append((agent, prev))
            chats[agent] = [*msgs, {"role": "assistant", "content": ev["response"]}]
        for n, (agent, chat) in enumerate([*done, *chats.items()]):
            yield _row(log, agent, chat, end, n)


def _row(log: Path, agent: str, chat: list[dict[str, Any]], end: dict[str, Any], n: int) -> dict[str, Any]:
    run_id = str(end.get("run_id", log.parent.name))
    return {"messages": chat, "metadata": {
        "all_turns": True, "decision_id": f"{run_id}:{log.parent.name}:{agent}:{n}", "role": "worker",
        "turns": sum(1 for m in chat if m.get("role") == "assistant"), "success": end.get("success")}}
