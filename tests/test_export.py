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


def _resolve(doc, ref):
    """ATIF v1.7 embedded form: the ref's trajectory_id names an entry of the root's subagent_trajectories."""
    (sub,) = [t for t in doc["subagent_trajectories"] if t["trajectory_id"] == ref["trajectory_id"]]
    return sub


def test_atif_orchestrator_with_worker_subtrajectory(events):
    doc = to_atif(events)
    assert doc["schema_version"] == "ATIF-v1.7" and doc["session_id"] == "proactive-flt-t1"
    steps = doc["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert [s["source"] for s in steps] == ["user", "agent", "agent", "agent"]
    assert [s["tool_calls"][0]["function_name"] for s in steps[1:]] == ["delegate_task", "revise_task", "complete"]
    (ref,) = steps[1]["observation"]["results"][0]["subagent_trajectory_ref"]
    assert set(ref) == {"trajectory_id", "session_id"}  # no JSON-pointer path: first-class subagents
    worker = _resolve(doc, ref)
    assert worker["trajectory_id"] == "proactive-flt-t1/worker-1" and worker["session_id"] == "proactive-flt-t1"
    assert "subagent_trajectories" not in doc["extra"]
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


def test_atif_validates_against_the_atif_models(events):
    """The third-party `atif` package's strict pydantic models (extra fields forbidden) accept the export."""
    atif = pytest.importorskip("atif", reason="the atif package is not installed (dev extra)")

    doc = atif.Trajectory.model_validate(to_atif(events))
    assert [s.trajectory_id for s in doc.subagent_trajectories] == ["proactive-flt-t1/worker-1"]
    refs = [r for s in doc.steps if s.observation for res in s.observation.results
            for r in (res.subagent_trajectory_ref or [])]
    assert [r.trajectory_id for r in refs] == ["proactive-flt-t1/worker-1"]


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
    pytest.importorskip("opentelemetry.exporter.otlp.proto.common", reason="porchestra[otel] not installed")
    res = CliRunner().invoke(app, ["otel", str(runs["proactive"] / "tasks" / "t1"), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    lines = (runs["proactive"] / "tasks" / "t1" / "trajectory.otel.jsonl").read_text().splitlines()
    assert any(json.loads(x)["name"] == "invoke_agent orchestrator" for x in lines)
    res = CliRunner().invoke(app, ["otel", str(runs["proactive"] / "tasks" / "t1")])
    assert res.exit_code == 0, res.output
    assert _parse_otlp_json((runs["proactive"] / "tasks" / "t1" / "trajectory.otlp.json").read_text())
    res = CliRunner().invoke(app, ["otel", str(runs["proactive"]), "--format", "xml"])
    assert res.exit_code == 2 and "--format" in res.output


def _parse_otlp_json(text):
    """Parse OTLP/JSON into opentelemetry-proto's ExportTraceServiceRequest. OTLP/JSON differs from the
    protobuf JSON mapping only in trace/span ids (hex instead of base64): convert them, parse strictly."""
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def b64(obj):
        if isinstance(obj, dict):
            return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
                    else b64(v) for k, v in obj.items()}
        return [b64(x) for x in obj] if isinstance(obj, list) else obj

    data = json.loads(text)
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                assert len(sp["traceId"]) == 32 and len(sp["spanId"]) == 16  # hex, as OTLP/JSON requires
                assert isinstance(sp["kind"], int)  # enums as integers
    return ParseDict(b64(data), ExportTraceServiceRequest())


def _spans_of(req):
    return [sp for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]


def _attrs(span):
    from google.protobuf.json_format import MessageToDict

    out = {}
    for kv in span.attributes:
        (kind, value), = MessageToDict(kv.value).items()
        out[kv.key] = (kind, value)
    return out


def test_otlp_json_parses_as_export_request_with_genai_conventions(events):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.common", reason="porchestra[otel] not installed")
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from porchestra.export.otel import export_spans, to_otlp_json

    req = _parse_otlp_json(json.dumps(to_otlp_json(export_spans(events))))
    (rs,) = req.resource_spans
    assert {kv.key: kv.value.string_value for kv in rs.resource.attributes}["service.name"] == "porchestra"
    spans = _spans_of(req)
    assert len(spans) == 9 + 4 + 2 and len({sp.trace_id for sp in spans}) == 1
    chats = [sp for sp in spans if _attrs(sp)["gen_ai.operation.name"] == ("stringValue", "chat")]
    assert len(chats) == 9 and all(sp.kind == Span.SPAN_KIND_CLIENT for sp in chats)
    a = _attrs(chats[0])
    # the provider and its model name, not the porchestra spec; typed values
    assert a["gen_ai.provider.name"] == ("stringValue", "porchestra.scripted")
    assert a["gen_ai.request.model"] == ("stringValue", "orchestrator")
    assert a["porchestra.model_spec"] == ("stringValue", "scripted:orchestrator")
    assert a["gen_ai.usage.input_tokens"] == ("intValue", "100")
    assert a["porchestra.cost_usd"][0] == "doubleValue"
    assert chats[0].name == "chat orchestrator"
    tools = [sp for sp in spans if sp.name.startswith("execute_tool")]
    assert all(sp.kind == Span.SPAN_KIND_INTERNAL for sp in tools)
    assert [sp.status.code for sp in tools][0] == 2  # STATUS_CODE_ERROR: the revoked tool
    worker = next(sp for sp in spans if sp.name == "invoke_agent worker-1")
    assert _attrs(worker)["porchestra.tools"][0] == "arrayValue"
    assert _attrs(worker)["porchestra.step_budget"][0] == "intValue"


@pytest.mark.parametrize("model,expect", [("openai:gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
                                          ("litellm:anthropic/claude-3-5", ("anthropic", "claude-3-5")),
                                          ("local:smollm2", ("porchestra.local", "smollm2"))])
def test_provider_names(model, expect):
    from porchestra.export.otel import provider_and_model

    assert provider_and_model(model) == expect


class _Collector:
    """A tiny OTLP/HTTP collector: records every POST /v1/traces body as an ExportTraceServiceRequest."""

    def __enter__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        got = self.requests = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf":
                    got.append(ExportTraceServiceRequest.FromString(body))
                    self.send_response(200)
                else:
                    self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def spans(self):
        return [sp for r in self.requests for sp in _spans_of(r)]


def test_export_otel_sends_to_a_collector(tmp_path_factory):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="porchestra[otel] not installed")
    import typer
    from typer.testing import CliRunner

    from porchestra.export.cli import export_otel_cmd

    runs = record(tmp_path_factory.mktemp("runs3"))
    app = typer.Typer()
    app.command("otel")(export_otel_cmd)
    app.command("x")(lambda: None)
    with _Collector() as col:
        res = CliRunner().invoke(app, ["otel", str(runs["proactive-flt"] / "tasks" / "t1"), "--endpoint", col.url])
    assert res.exit_code == 0, res.output
    assert "sent 15 spans" in res.output
    assert sorted(sp.name for sp in col.spans()).count("chat orchestrator") == 3


def test_live_otlp_export_during_a_run(tmp_path):
    """`porchestra run --otlp-endpoint URL` sends the run's spans while it runs (a real CLI process)."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="porchestra[otel] not installed")
    import subprocess
    import sys

    from conftest import complete, delegate, report

    o, w = tmp_path / "o.json", tmp_path / "w.json"
    o.write_text(json.dumps([delegate("say hi", []), complete("hi")]))
    w.write_text(json.dumps([report("finish", "said hi")]))
    with _Collector() as col:
        p = subprocess.run([sys.executable, "-m", "porchestra", "run", "Say hi.", "--orchestrator-model",
                            f"scripted:{o}", "--worker-model", f"scripted:{w}", "--out", str(tmp_path / "run"),
                            "-q", "--otlp-endpoint", col.url], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    names = sorted(sp.name for sp in col.spans())
    assert names == ["chat o.json", "chat o.json", "chat w.json", "invoke_agent orchestrator",
                     "invoke_agent worker-1"], names
    assert len({sp.trace_id for sp in col.spans()}) == 1


def test_live_otlp_export_during_an_eval(tmp_path):
    """`porchestra eval --otlp-endpoint URL`: one trace per (task, trial), sent while the eval runs."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="porchestra[otel] not installed")
    import subprocess
    import sys

    from conftest import complete, delegate, report

    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"id": f"t{i}", "instruction": "Say hi."}) + "\n"
                                                  for i in (1, 2)))
    (tmp_path / "o.json").write_text(json.dumps([delegate("say hi", []), complete("hi")]))
    (tmp_path / "w.json").write_text(json.dumps([report("finish", "said hi")]))
    (tmp_path / "cfg.yaml").write_text(json.dumps({"env_options": {"allow_unisolated": True}}))
    with _Collector() as col:
        p = subprocess.run([sys.executable, "-m", "porchestra", "eval", "general", "--tasks", str(tmp_path / "tasks.jsonl"),
                            "-c", str(tmp_path / "cfg.yaml"), "--orchestrator-model", f"scripted:{tmp_path / 'o.json'}",
                            "--worker-model", f"scripted:{tmp_path / 'w.json'}", "--out", str(tmp_path / "ev"), "-q",
                            "--max-concurrency", "2", "--otlp-endpoint", col.url],
                           capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
    spans = col.spans()
    assert len({sp.trace_id for sp in spans}) == 2
    roots = [sp for sp in spans if sp.name == "invoke_agent orchestrator"]
    assert sorted(a.value.string_value for sp in roots for a in sp.attributes if a.key == "porchestra.task_id") == [
        "t1", "t2"]
