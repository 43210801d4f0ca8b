"""Decision records: one per orchestrator decision, derived from event logs (docs/events.md).

A record holds the exact rendered context the orchestrator saw (`messages`), its raw reply
(`decision`), the decision type, the trajectory's outcome and a link to the worker trace that
followed. Records are the input of attribution, SFT/RWR/OPOD training and DA-GRPO.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, Field

from ..log.events import read_events
from ..log.trajectory import find_event_logs as event_logs_under
from ..parsing import FormatError, parse_decision

RECORD_FORMAT = "porchestra.decision.v1"
DecisionType = Literal["delegate", "revise", "end", "terminate", "other", "invalid"]

_TYPE_OF_ACTION = {
    "delegate_task": "delegate", "delegate_tasks": "delegate", "revise_task": "revise",
    "complete": "end", "finalize_task": "end", "submit": "end", "terminate": "terminate",
    "wait": "other",
}
_EFFECTS = ("delegate", "revise", "terminate", "complete")


class TraceLink(BaseModel):
    """Where the worker trace that followed a decision lives: the events file and its line range
    (1-based, inclusive) plus the worker it concerns."""

    events: str
    worker_ids: list[str] = Field(default_factory=list)
    decision_line: int
    first_line: int | None = None
    last_line: int | None = None


class DecisionRecord(BaseModel):
    format: str = RECORD_FORMAT
    decision_id: str
    run_id: str
    task_id: str
    step: int
    index: int  # ordinal of this decision within its trajectory
    messages: list[dict[str, Any]]
    decision: str
    action: str | None
    decision_type: DecisionType
    valid: bool
    hint_slot: dict[str, int] | None = None
    handoff: dict[str, Any] | None = None
    model: str | None = None
    success: bool | None = None
    score: float | None = None
    reward: float | None = None  # binary trajectory reward: 1.0 success, 0.0 failure, None unknown
    trace: TraceLink


class RecordError(ValueError):
    """Bad input to the exporter (path, file); the message names what is wrong."""


def find_event_logs(paths: list[str | Path]) -> list[Path]:
    """Accept a run dir, an eval dir (searched recursively) or an events.jsonl path."""
    found: list[Path] = []
    for p in paths:
        try:
            found.extend(event_logs_under(p))
        except FileNotFoundError as e:
            raise RecordError(f"RUN_DIR {p}: {e}") from None
    return found


def _classify(action: str | None, response: str) -> tuple[DecisionType, bool]:
    if action is None:
        return "invalid", False
    try:
        parse_decision(response)
    except FormatError:
        return "invalid", False
    return _TYPE_OF_ACTION.get(action, "other"), True  # type: ignore[return-value]


def _trajectory_key(path: Path, run_id: str, task_id: str) -> str:
    # eval runs: <dir>/tasks/<task_id>__<trial>/events.jsonl — the folder name tells trials apart
    return f"{run_id}:{path.parent.name}" if path.parent.parent.name == "tasks" else f"{run_id}:{task_id}"


def records_from_events(path: str | Path) -> list[DecisionRecord]:
    path = Path(path)
    try:
        events = read_events(path)
    except (OSError, ValueError) as e:
        raise RecordError(f"RUN_DIR {path}: unreadable event log ({e})") from None
    end = next((e for e in reversed(events) if e.get("event") == "task_end"), None)
    success = end.get("success") if end else None
    score = end.get("score") if end else None
    if isinstance(score, dict):  # a Score object: keep its numeric value
        score = score.get("value", score.get("score"))
    reward = None if success is None else float(bool(success))
    out: list[DecisionRecord] = []
    for i, ev in enumerate(events):
        if ev.get("event") != "llm_call" or ev.get("role") != "orchestrator" or ev.get("response") is None:
            continue
        effects = list(_effects_after(events, i))
        workers = [e["agent_id"] for e in effects if e["event"] in ("delegate", "revise", "terminate")]
        action = ev.get("decision")
        dtype, valid = _classify(action, ev["response"])
        first, last = _trace_span(events, i, workers)
        run_id, task_id = str(ev.get("run_id", "")), str(ev.get("task_id", ""))
        n = len(out)
        out.append(DecisionRecord(
            decision_id=f"{_trajectory_key(path, run_id, task_id)}:{n:03d}", run_id=run_id,
            task_id=task_id, step=int(ev.get("step", 0)), index=n, messages=ev.get("messages") or [],
            decision=ev["response"], action=action, decision_type=dtype, valid=valid,
            hint_slot=ev.get("hint_slot"), handoff=ev.get("handoff"), model=ev.get("model"),
            success=success, score=score if isinstance(score, (int, float)) else None, reward=reward,
            trace=TraceLink(events=str(path), worker_ids=workers, decision_line=i + 1,
                            first_line=first, last_line=last),
        ))
    return out


def _effects_after(events: list[dict[str, Any]], i: int) -> Iterator[dict[str, Any]]:
    """The events applying decision i: effect events before the next LLM call."""
    for ev in events[i + 1:]:
        if ev.get("event") == "llm_call":
            return
        if ev.get("event") in _EFFECTS:
            yield ev


def worker_trace(events: list[dict[str, Any]], i: int, workers: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """(index, event) of the trace that followed decision i for `workers`: their steps, tool calls,
    reports, revisions and termination, the orchestrator's responses to their reports, until each
    worker's lifecycle ends (terminate, or finish/stop answered by something other than a revision)."""
    live = set(workers)
    awaiting: set[str] = set()  # workers whose finish/stop awaits the orchestrator's answer
    trace: list[tuple[int, dict[str, Any]]] = []
    for j in range(i + 1, len(events)):
        if not live:
            break
        ev = events[j]
        kind, agent = ev.get("event"), ev.get("agent_id")
        if kind == "task_end":
            trace.append((j, ev))
            break
        if kind == "llm_call" and ev.get("role") == "orchestrator":
            w = (ev.get("handoff") or {}).get("worker_id")
            if w in live:
                trace.append((j, ev))
                if w in awaiting:  # answered a finish/stop: unless it revises, the lifecycle is over
                    effects = list(_effects_after(events, j))
                    if not any(e["event"] == "revise" and e["agent_id"] == w for e in effects):
                        live.discard(w)
                    awaiting.discard(w)
            continue
        if agent in live:
            trace.append((j, ev))
            if kind == "terminate":
                live.discard(agent)
            elif kind == "report" and ev.get("type") in ("finish", "stop"):
                awaiting.add(agent)
    return trace


def _trace_span(events: list[dict[str, Any]], i: int, workers: list[str]) -> tuple[int | None, int | None]:
    tr = worker_trace(events, i, workers) if workers else []
    return (tr[0][0] + 1, tr[-1][0] + 1) if tr else (None, None)


def collect_records(paths: list[str | Path]) -> list[DecisionRecord]:
    records: list[DecisionRecord] = []
    for log in find_event_logs(paths):
        records.extend(records_from_events(log))
    return records


def to_sft_example(rec: DecisionRecord, fmt: str = "prompt-completion") -> dict[str, Any]:
    """One SFT example. `prompt-completion`: TRL's conversational prompt/completion format (the
    prompt is masked by default); `messages`: one chat whose last turn is the decision
    (LLaMA-Factory sharegpt/openai style). `metadata` travels along for filtering."""
    answer = {"role": "assistant", "content": rec.decision}
    meta = {"decision_id": rec.decision_id, "task_id": rec.task_id, "decision_type": rec.decision_type,
            "action": rec.action, "success": rec.success, "reward": rec.reward}
    if fmt == "prompt-completion":
        return {"prompt": rec.messages, "completion": [answer], "metadata": meta}
    if fmt == "messages":
        return {"messages": [*rec.messages, answer], "metadata": meta}
    raise RecordError(f"--format: unknown SFT format {fmt!r} (prompt-completion | messages)")


def sft_records(records: list[DecisionRecord]) -> list[DecisionRecord]:
    """Structurally valid decisions from expert runs, successful and failed alike (paper E.2.1)."""
    return [r for r in records if r.valid and r.messages]


def read_records(path: str | Path) -> list[DecisionRecord]:
    import json

    p = Path(path)
    if not p.is_file():
        raise RecordError(f"--records: no such file {p}")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(DecisionRecord.model_validate(json.loads(line)))
            except ValueError as e:
                raise RecordError(f"--records {p}:{n}: not a decision record ({str(e)[:200]})") from None
    return out
