"""Typed events: every event of the suite's recorded runs reads through its own model; invalid lines
are named by file:line; the log may gain fields; the writer refuses an event that does not fit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from recorded_runs import record

import porchestra as po
from porchestra.log.events import EventLog
from porchestra.log.schema import EVENT_MODELS, Event, EventError, ToolCallEvent

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> list[Path]:
    runs = record(tmp_path_factory.mktemp("recorded"))
    found = [p for d in runs.values() for p in sorted(d.rglob("events.jsonl"))]
    found += sorted((ROOT / "tests" / "fixtures").rglob("events.jsonl"))
    assert len(found) >= 12
    return found


def test_every_recorded_event_reads_as_its_own_type(logs):
    seen: set[str] = set()
    for path in logs:
        raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        typed = po.read_events(path, strict=True)
        assert len(typed) == len(raw)
        for line, e in zip(raw, typed):
            assert type(e) is EVENT_MODELS[line["event"]], (path, line["event"])
            assert e.to_dict() == line  # nothing lost, nothing invented
            assert dict(e) == line and e["event"] == line["event"]
            seen.add(e.event)
    assert {"task_start", "llm_call", "delegate", "tool_call", "report", "revise", "fault", "complete",
            "task_end"} <= seen


def test_typed_fields(logs):
    events = po.read_events(logs[0])
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls and all(isinstance(c.ok, bool) and c.output["length"] >= 0 for c in calls)
    assert events[-1].totals["llm_calls"] == sum(1 for e in events if e.event == "llm_call")


def _line(**kw) -> str:
    base = {"v": 1, "ts": "2026-01-01T00:00:00.000+00:00", "run_id": "r", "task_id": "t", "step": 1,
            "agent_id": "worker-1", "parent_agent_id": "orchestrator"}
    return json.dumps({**base, **kw})


def test_invalid_line_is_named_by_file_and_line(tmp_path):
    p = tmp_path / "events.jsonl"
    p.write_text(_line(event="notification", text="hi") + "\n"
                 + _line(event="tool_call", tool="buy", ok="maybe") + "\n")
    with pytest.raises(EventError, match=re.escape(f"{p}:2: invalid tool_call event: ok:")):
        po.read_events(p)
    p.write_text("{not json\n" + _line(event="notification", text="x") + "\n")
    with pytest.raises(EventError, match=re.escape(f"{p}:1: corrupt event line")):
        po.read_events(p)


def test_the_log_may_gain_fields_and_types(tmp_path):
    p = tmp_path / "events.jsonl"
    p.write_text(_line(event="tool_call", tool="buy", ok=True, latency_ms=3) + "\n"
                 + _line(event="checkpoint", saved=True) + "\n" + '{"v": 1, "ts": "2026')  # torn last line
    a, b = po.read_events(p)
    assert isinstance(a, ToolCallEvent) and a.model_extra == {"latency_ms": 3} and a["latency_ms"] == 3
    assert type(b) is Event and b.event == "checkpoint" and b["saved"] is True
    with pytest.raises(EventError, match=":3:"):
        po.read_events(p, strict=True)


def test_writer_refuses_an_event_that_does_not_fit(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", "r", "t")
    log.emit("tool_call", "worker-1", "orchestrator", tool="buy", args={}, ok=True)
    with pytest.raises(TypeError, match="tool_call"):
        log.emit("tool_call", "worker-1", "orchestrator", tool="buy", ok="sometimes")
    log.close()
    assert [e.event for e in po.read_events(tmp_path / "events.jsonl", strict=True)] == ["tool_call"]


def test_docs_name_every_field_of_every_event_type():
    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"### `(\w+)` — `\w+`\n(.*?)(?=\n### |\Z)", text, re.S))
    assert set(sections) == set(EVENT_MODELS)
    envelope = set(Event.model_fields)
    for kind, model in EVENT_MODELS.items():
        for name in set(model.model_fields) - envelope:
            assert f"`{name}`" in sections[kind], f"docs/events.md: {kind}.{name} is not documented"
