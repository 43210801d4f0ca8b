"""Decision records, SFT export and F.3 attribution from hand-made event logs (tests/fixtures/train)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porchestra.log.events import EventLog, read_events
from porchestra.models.gateway import Gateway
from porchestra.models.scripted import ScriptedModel
from porchestra.train.attribution import Truncation, attribute, parse_attribution, render_trace
from porchestra.train.hints import with_hint
from porchestra.train.records import RecordError, collect_records, sft_records, to_sft_example

F = Path(__file__).parent / "fixtures" / "train"


def test_one_record_per_orchestrator_decision_with_type_reward_and_trace_link():
    recs = collect_records([F / "run_fail"])
    assert [r.decision_type for r in recs] == ["delegate", "revise", "end"]
    assert all(r.reward == 0.0 and r.success is False and r.valid for r in recs)
    events = read_events(F / "run_fail" / "events.jsonl")
    d = recs[0]
    src = events[d.trace.decision_line - 1]
    assert src["event"] == "llm_call" and src["role"] == "orchestrator"
    assert d.messages == src["messages"] and d.decision == src["response"]  # exact context and reply
    assert d.hint_slot == src["hint_slot"] and d.trace.worker_ids == ["w1"]
    # the linked trace spans the worker's steps up to its finish report answered by `complete`
    span = events[d.trace.first_line - 1: d.trace.last_line]
    assert span[0]["event"] == "delegate" and span[-1]["role"] == "orchestrator"
    assert {e["event"] for e in span} >= {"tool_call", "report", "revise"}
    # the revision's trace starts after the revise decision
    assert recs[1].trace.first_line > recs[1].trace.decision_line
    assert recs[1].handoff == {"worker_id": "w1", "kind": "report", "report_type": "revise"}


def test_eval_layout_is_searched_and_malformed_decisions_are_invalid():
    recs = collect_records([F / "evalrun"])
    assert len({r.decision_id for r in recs}) == len(recs) == 6  # trials are told apart
    bad = [r for r in recs if not r.valid]
    assert len(bad) == 1 and bad[0].decision_type == "invalid" and bad[0].action is None
    sft = sft_records(recs)
    assert len(sft) == 5 and {r.success for r in sft} == {True, False}  # failed runs stay in SFT


def test_sft_formats():
    rec = collect_records([F / "run_ok"])[0]
    pc = to_sft_example(rec)
    assert pc["prompt"] == rec.messages and pc["completion"] == [{"role": "assistant", "content": rec.decision}]
    msgs = to_sft_example(rec, "messages")["messages"]
    assert msgs[:-1] == rec.messages and msgs[-1]["content"] == rec.decision
    with pytest.raises(RecordError, match="--format"):
        to_sft_example(rec, "alpaca")


def test_missing_run_dir_is_named():
    with pytest.raises(RecordError, match="RUN_DIR .*nope"):
        collect_records([F / "nope"])


@pytest.mark.parametrize("text,expected", [
    ('{"needs_repair": true, "hint": "Add execute_python."}', (True, "Add execute_python.", "ok")),
    ('```json\n{"needs_repair": false, "hint": ""}\n```', (False, "", "ok")),
    ('{"needs_repair": "true", "hint": "x"}', (True, "x", "ok")),
    ('{"needs_repair": true, "hint": ""}', (False, "", "uncertain")),
    ('{"needs_repair": "maybe", "hint": "x"}', (False, "", "uncertain")),
    ('{"needs_repair": true, "hint": "a"} {"needs_repair": false}', (False, "", "uncertain")),
    ("I cannot decide.", (False, "", "unparseable")),
    ("", (False, "", "unparseable")),
])
def test_attribution_parsing_is_conservative(text, expected):
    assert parse_attribution(text) == expected


def test_attribution_runs_through_the_gateway_is_cached_and_resumable(tmp_path):
    replies = ['{"needs_repair": true, "hint": "Include execute_python in the tools."}', "garbage",
               '{"needs_repair": false, "hint": ""}']
    model = ScriptedModel(replies, name="scripted:attr")
    log = EventLog(tmp_path / "attribution_events.jsonl", "a", "attribution")
    out = tmp_path / "attr.jsonl"
    res = attribute([F / "run_fail", F / "run_ok"], model, Gateway(log), out)
    assert [(r.decision_id, r.needs_repair, r.status) for r in res] == [
        ("r-fail:sum:000", True, "ok"), ("r-fail:sum:001", False, "unparseable"), ("r-ok:sum:000", False, "ok")]
    assert res[0].hint == "Include execute_python in the tools." and res[1].raw == "garbage"
    calls = [e for e in read_events(tmp_path / "attribution_events.jsonl") if e["event"] == "llm_call"]
    assert len(calls) == 3 and {c["role"] for c in calls} == {"attributor"}
    assert {c["component"] for c in calls} == {"attribution"}
    prompt = model.calls[0][1]["content"]
    assert "Target decision:" in prompt and '"tools": ["read_file"]' in prompt and "report revise" in prompt
    # rerun: everything comes from the cache, no model call
    again = attribute([F / "run_fail", F / "run_ok"], ScriptedModel([], name="scripted:attr"), Gateway(log), out)
    assert [a.model_dump() for a in again] == [a.model_dump() for a in res]
    assert len(json.loads("[" + ",".join(out.read_text().splitlines()) + "]")) == 3


def test_attribution_errors_are_recorded_false_and_retried(tmp_path):
    log = EventLog(tmp_path / "ev.jsonl", "a", "attribution")
    out = tmp_path / "attr.jsonl"
    res = attribute([F / "run_ok"], ScriptedModel([]), Gateway(log), out)  # exhausted → ModelError
    assert [(r.status, r.needs_repair) for r in res] == [("error", False)]
    res = attribute([F / "run_ok"], ScriptedModel(['{"needs_repair": false, "hint": ""}']), Gateway(log), out)
    assert [(r.status, r.needs_repair) for r in res] == [("ok", False)]


def test_trace_truncation_keeps_head_and_tail():
    events = [{"event": "tool_call", "agent_id": "w1", "tool": "t", "args": {}, "ok": True,
               "output": {"text": f"out{i} " + "x" * 300}} for i in range(100)]
    text, cut = render_trace(events, Truncation(trace_chars=4000, event_chars=200))
    assert cut and len(text) <= 4200 and "out0 " in text and "out99 " in text and "events omitted" in text
    text, cut = render_trace(events[:3], Truncation())
    assert not cut and "out2 " in text


def test_hint_goes_to_the_recorded_slot():
    rec = collect_records([F / "run_fail"])[0]
    msgs = with_hint(rec.messages, rec.hint_slot, "Add execute_python.")
    assert msgs[1]["content"].startswith(rec.messages[1]["content"]) and "Add execute_python." in msgs[1]["content"]
    assert rec.messages[1]["content"].count("Add execute_python.") == 0  # original untouched


@pytest.fixture(scope="module")
def loop_runs(tmp_path_factory):
    from recorded_runs import record  # scripted runs through the real loop (tests/recorded_runs.py)

    return record(tmp_path_factory.mktemp("runs"))


def test_records_from_real_loop_runs(loop_runs):
    recs = collect_records([loop_runs["proactive-flt"]])
    t1 = [r for r in recs if r.task_id == "t1"]
    assert [r.decision_type for r in t1] == ["delegate", "revise", "end"]
    assert all(r.valid and r.success is True and r.reward == 1.0 for r in t1)
    assert [r.reward for r in recs if r.task_id == "t2"] == [0.0, 0.0]
    d, rv = t1[0], t1[1]
    assert d.trace.worker_ids and rv.trace.worker_ids == d.trace.worker_ids
    assert rv.handoff and rv.handoff["worker_id"] == d.trace.worker_ids[0]
    events = read_events(d.trace.events)
    span = events[d.trace.first_line - 1: d.trace.last_line]
    assert any(e["event"] == "report" and e.get("type") == "revise" for e in span)
    # the recorded hint slot is a real position in the rendered context
    for r in t1:
        assert r.hint_slot is not None
        msgs = with_hint(r.messages, r.hint_slot, "HINT-XYZ")
        i = r.hint_slot["message_index"]
        assert "HINT-XYZ" in msgs[i]["content"] and len(msgs) == len(r.messages)
    # eval layout (tasks/<id>/events.jsonl) of several configurations at once
    assert len(collect_records(list(loop_runs.values()))) >= 8


def test_attribution_over_real_loop_runs(loop_runs, tmp_path):
    model = ScriptedModel(['{"needs_repair": false, "hint": ""}'] * 20, name="scripted:a")
    res = attribute([loop_runs["proactive-flt"]], model, Gateway(EventLog(tmp_path / "e.jsonl", "a", "x")),
                    tmp_path / "a.jsonl")
    assert len(res) == 3 and {r.decision_type for r in res} == {"delegate", "revise"}
    assert all("Subsequent trace" in c[1]["content"] for c in model.calls)
