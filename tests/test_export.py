"""ATIF and OpenTelemetry exports of a recorded run (revoked tool → revise → recovery)."""

import json

import pytest
from recorded_runs import record

from porchestra.export.atif import to_atif
from porchestra.log.events import read_events


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    runs = record(tmp_path_factory.mktemp("runs"))
    return read_events(runs["proactive-flt"] / "tasks" / "t1" / "events.jsonl")


def _pointer(doc, ptr):
    for part in ptr.lstrip("#/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def test_atif_orchestrator_with_worker_subtrajectory(events):
    doc = to_atif(events)
    assert doc["schema_version"] == "ATIF-v1.4" and doc["session_id"] == "proactive-flt-t1"
    steps = doc["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert [s["source"] for s in steps] == ["user", "agent", "agent", "agent"]
    assert [s["tool_calls"][0]["function_name"] for s in steps[1:]] == ["delegate_task", "revise_task", "complete"]
    (ref,) = steps[1]["observation"]["results"][0]["subagent_trajectory_ref"]
    worker = _pointer(doc, ref["trajectory_path"])
    assert worker["session_id"] == ref["session_id"] == "proactive-flt-t1/worker-1"
    ws = worker["steps"]
    assert [s["source"] for s in ws] == ["user"] + ["agent"] * 2 + ["user"] + ["agent"] * 4
    assert [s["tool_calls"][0]["function_name"] for s in ws if s["source"] == "agent"] == [
        "buy", "revise", "purchase", "purchase", "total", "finish"]
    first = ws[1]
    assert first["observation"]["results"][0]["source_call_id"] == first["tool_calls"][0]["tool_call_id"]
    assert "revoked" in first["observation"]["results"][0]["content"]
    assert [f["phase"] for f in first["extra"]["fault"]] == ["activate", "hit"]
    assert ws[2]["extra"]["report"][0]["request"] == "give me another purchase tool"
    assert json.loads(ws[3]["message"].removeprefix("[revise_task] "))["tools"] == ["purchase", "total"]
    assert ws[3]["extra"]["harness_after"]["tools"] == ["purchase", "total"]
    fm, wm = doc["final_metrics"], worker["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_cost_usd"]) == (300, pytest.approx(0.36))
    assert (wm["total_completion_tokens"], wm["total_cost_usd"]) == (60, pytest.approx(0.072))
    assert doc["extra"]["task_end"]["success"] is True
    json.dumps(doc)  # plain JSON


def test_otel_spans_follow_genai_conventions(events):
    pytest.importorskip("opentelemetry.sdk", reason="optional dependency opentelemetry-sdk not installed")
    from porchestra.export.otel import export_spans, spans_to_json

    spans = spans_to_json(export_spans(events))
    by_name = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    (root,) = by_name["invoke_agent orchestrator"]
    (worker,) = by_name["invoke_agent worker-1"]
    assert root["parent_id"] is None and worker["parent_id"] == root["context"]["span_id"]
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 9 and sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == 900
    assert {s["parent_id"] for s in chats if s["attributes"]["porchestra.role"] == "worker"} == {
        worker["context"]["span_id"]}
    tools = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert [(s["attributes"]["gen_ai.tool.name"], s["status"]["status_code"]) for s in tools] == [
        ("buy", "ERROR"), ("purchase", "UNSET"), ("purchase", "UNSET"), ("total", "UNSET")]
    assert all(s["parent_id"] == worker["context"]["span_id"] for s in tools)
    assert [e["name"] for e in worker["events"]] == ["fault", "fault", "report", "revise", "report", "terminate"]
    assert [e["name"] for e in root["events"]] == ["complete"]


def test_export_cli(tmp_path_factory, tmp_path):
    import typer
    from typer.testing import CliRunner

    from porchestra.export.cli import export_atif_cmd, export_otel_cmd

    runs = record(tmp_path_factory.mktemp("runs2"))
    app = typer.Typer()
    app.command("atif")(export_atif_cmd)
    app.command("otel")(export_otel_cmd)
    res = CliRunner().invoke(app, ["atif", str(runs["proactive"]), "--out", str(tmp_path / "atif")])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "atif").iterdir()) == ["t1.atif.json", "t2.atif.json"]
    res = CliRunner().invoke(app, ["otel", str(runs["proactive"] / "tasks" / "t1")])
    assert res.exit_code == 0, res.output
    lines = (runs["proactive"] / "tasks" / "t1" / "trajectory.otel.jsonl").read_text().splitlines()
    assert any(json.loads(x)["name"] == "invoke_agent orchestrator" for x in lines)
