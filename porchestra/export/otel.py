"""Event log → OpenTelemetry spans following the GenAI semantic conventions, as real OTLP.

    invoke_agent orchestrator                      root, INTERNAL; gen_ai.operation.name = invoke_agent
    ├── chat <model>                               CLIENT, one per orchestrator LLM call, gen_ai.usage.*
    └── invoke_agent worker-N                      INTERNAL, from its delegation to its end
        ├── chat <model>                           CLIENT, one per worker LLM call
        └── execute_tool <tool>                    INTERNAL, gen_ai.tool.name, error status when it failed
Reports, revisions, faults and format errors are span events on the agent's span. Times come from the
log (`ts`, and `latency_ms` for LLM calls). `gen_ai.provider.name` and `gen_ai.request.model` are the
provider and its model name (`openai:gpt-4.1-mini` → openai, gpt-4.1-mini); the porchestra spec stays
in `porchestra.model_spec`.

The same SpanBuilder serves a finished log (`export_spans`) and a live run (fed one event at a time by
an event-log listener, see export/live.py). `to_otlp_json` writes the OTLP/JSON encoding of an
ExportTraceServiceRequest (hex ids, integer enums), what an OTLP/HTTP collector accepts. Needs the
optional extra `porchestra[otel]` (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

# events that become span events on the agent's span (their fields become typed attributes)
SPAN_EVENTS = ("report", "revise", "fault", "format_error", "terminate", "complete", "notification", "plan")
_SKIP = ("v", "ts", "run_id", "task_id", "event", "messages")


def _ns(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1e9)


def require_otel() -> None:
    import importlib.util

    try:
        found = all(importlib.util.find_spec(m) is not None for m in (
            "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common"))
    except ModuleNotFoundError:  # no `opentelemetry` package at all
        found = False
    if not found:
        raise RuntimeError("OpenTelemetry export needs the optional dependencies: pip install 'porchestra[otel]'")


def provider_and_model(spec: str | None) -> tuple[str, str]:
    """`openai:gpt-4.1-mini` → (openai, gpt-4.1-mini); `litellm:anthropic/claude-x` → (anthropic, claude-x);
    local / scripted / replay models are porchestra's own (porchestra.local, …)."""
    backend, _, name = (spec or "").partition(":")
    if not name:
        return "unknown", spec or ""
    if backend == "openai":
        return "openai", name
    if backend == "litellm":
        provider, _, model = name.partition("/")
        return (provider, model) if model else ("litellm", name)
    return f"porchestra.{backend}", name


def _typed(v: Any) -> Any:
    """An attribute value OTLP can carry typed: scalars as they are, lists of one scalar type, else JSON."""
    if isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return list(v)
    return json.dumps(v, ensure_ascii=False, default=str)


class SpanBuilder:
    """Feed event dicts in log order; spans end as soon as what they cover has ended."""

    def __init__(self, processors: list[Any] = ()):  # extra span processors (e.g. a live OTLP exporter)
        require_otel()
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from ..cli_support import version

        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "porchestra",
                                                                 "service.version": version()}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        for p in processors:
            self.provider.add_span_processor(p)
        self.tracer = self.provider.get_tracer("porchestra.export", version())
        self.root: Any = None
        self.agents: dict[str, Any] = {}
        self.last_ts: dict[str, int] = {}
        self.run_id = ""
        self.closed = False

    def _start(self, name: str, kind: Any, parent: Any, t: int, attrs: dict[str, Any]) -> Any:
        from opentelemetry import trace

        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=ctx, kind=kind, start_time=t,
                                      attributes={k: _typed(v) for k, v in attrs.items() if v is not None})

    def _ensure_root(self, e: dict[str, Any], t: int) -> None:
        if self.root is not None:
            return
        from opentelemetry.trace import SpanKind

        cfg = e.get("config") or {}
        self.run_id = e.get("run_id", "")
        provider, model = provider_and_model(cfg.get("orchestrator_model"))
        self.root = self._start("invoke_agent orchestrator", SpanKind.INTERNAL, None, t, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orchestrator",
            "gen_ai.agent.id": self.run_id, "gen_ai.conversation.id": self.run_id,
            "gen_ai.provider.name": provider if cfg else None, "gen_ai.request.model": model if cfg else None,
            "porchestra.task_id": e.get("task_id"), "porchestra.mode": cfg.get("mode"),
            "porchestra.model_spec": cfg.get("orchestrator_model")})
        self.agents["orchestrator"] = self.root

    def feed(self, e: dict[str, Any]) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        kind, agent, t = e["event"], e.get("agent_id") or "orchestrator", _ns(e["ts"])
        self._ensure_root(e, t)
        if kind == "delegate":
            h = e.get("harness") or {}
            provider, model = provider_and_model(e.get("model_name"))
            self.agents[agent] = self._start(f"invoke_agent {agent}", SpanKind.INTERNAL, self.root, t, {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                "gen_ai.agent.id": f"{self.run_id}/{agent}", "gen_ai.conversation.id": self.run_id,
                "gen_ai.provider.name": provider, "gen_ai.request.model": model,
                "porchestra.model_spec": e.get("model_name"), "porchestra.subgoal": h.get("subgoal", ""),
                "porchestra.tools": list(h.get("tools") or []), "porchestra.step_budget": int(h.get("step_budget") or 0)})
        parent = self.agents.get(agent, self.root)
        prev = self.last_ts.get(agent, t)
        if kind == "llm_call":
            u = e.get("usage") or {}
            provider, model = provider_and_model(e.get("model"))
            begin = t - int(float(e.get("latency_ms") or 0) * 1e6)
            span = self._start(f"chat {model}", SpanKind.CLIENT, parent, begin, {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                "gen_ai.request.model": model, "gen_ai.response.model": model if not e.get("error") else None,
                "gen_ai.agent.name": agent, "gen_ai.conversation.id": self.run_id,
                "gen_ai.usage.input_tokens": int(u.get("input") or 0),
                "gen_ai.usage.output_tokens": int(u.get("output") or 0),
                "gen_ai.usage.cache_read.input_tokens": int(u["cached_input"]) if u.get("cached_input") else None,
                "porchestra.model_spec": e.get("model"), "porchestra.role": e.get("role"),
                "porchestra.component": e.get("component"), "porchestra.step": int(e.get("step") or 0),
                "porchestra.cost_usd": float(e["cost_usd"]) if e.get("cost_usd") is not None else None,
                "porchestra.latency_ms": float(e.get("latency_ms") or 0),
                "error.type": str(e["error"]).split(":", 1)[0] if e.get("error") else None})
            if e.get("error"):
                span.set_status(Status(StatusCode.ERROR, str(e["error"])[:200]))
            span.end(end_time=t)
        elif kind == "tool_call":
            span = self._start(f"execute_tool {e.get('tool')}", SpanKind.INTERNAL, parent, prev, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": e.get("tool") or "",
                "gen_ai.tool.type": "function", "gen_ai.tool.call.id": f"{agent}-s{e.get('step')}",
                "gen_ai.tool.call.arguments": json.dumps(e.get("args"), ensure_ascii=False),
                "porchestra.refused": bool(e.get("refused")),
                "error.type": "tool_error" if not e.get("ok") else None})
            if not e.get("ok"):
                span.set_status(Status(StatusCode.ERROR, str(e.get("error"))[:200]))
            span.end(end_time=t)
        elif kind in SPAN_EVENTS:
            attrs = {k: _typed(v) for k, v in e.items() if k not in _SKIP and v is not None}
            parent.add_event(kind, attributes=attrs, timestamp=t)
        self.last_ts[agent] = t
        if kind == "terminate" and agent != "orchestrator" and agent in self.agents:
            self.agents.pop(agent).end(end_time=t)
        elif kind == "task_end":
            self._finish(e, t)

    def _finish(self, end: dict[str, Any], t: int) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.root.set_attribute("porchestra.success", str(end.get("success")))
        if end.get("score") is not None:
            self.root.set_attribute("porchestra.score", float(end["score"]))
        if end.get("success") is False:
            self.root.set_status(Status(StatusCode.ERROR, str(end.get("reason"))[:200]))
        self.close(t)

    def close(self, t: int | None = None) -> None:
        """End what is still open (a worker at its last event, the root at `t`) and flush the exporters."""
        if self.closed:
            return
        self.closed = True
        if self.root is not None:
            for agent, span in list(self.agents.items()):
                if agent != "orchestrator":
                    span.end(end_time=self.last_ts.get(agent, t))
            self.root.end(end_time=t or max(self.last_ts.values(), default=None))
        self.provider.shutdown()

    def spans(self) -> list[Any]:
        return list(self.memory.get_finished_spans())


def export_spans(events: list[dict[str, Any]], exporter: Any = None) -> list[Any]:
    """Spans of one finished log (also handed to `exporter`, if given); returns the finished spans."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    b = SpanBuilder([SimpleSpanProcessor(exporter)] if exporter is not None else [])
    for e in events:
        b.feed(e)
    b.close()
    return b.spans()


def spans_to_json(spans: list[Any]) -> list[dict[str, Any]]:
    """The SDK's own JSON of each span (one dict per span; the `--format jsonl` output)."""
    return [json.loads(s.to_json(indent=None)) for s in spans]


def to_otlp_request(spans: list[Any]) -> Any:
    """An opentelemetry-proto ExportTraceServiceRequest holding the spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans)


def _hex_ids(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else _hex_ids(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hex_ids(x) for x in obj]
    return obj


def to_otlp_json(spans: list[Any]) -> dict[str, Any]:
    """OTLP/JSON (the OTLP spec's JSON encoding: lowerCamelCase fields, hex trace/span ids, integer enums)."""
    from google.protobuf.json_format import MessageToDict

    return _hex_ids(MessageToDict(to_otlp_request(spans), use_integers_for_enums=True))


def otlp_traces_url(endpoint: str) -> str:
    """A collector base URL (http://host:4318) or the full traces URL → the traces URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def otlp_exporter(endpoint: str, timeout_s: float = 10.0) -> Any:
    """The OTLP/HTTP (protobuf) span exporter of opentelemetry-exporter-otlp-proto-http."""
    require_otel()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise RuntimeError("sending to an OTLP endpoint needs: pip install 'porchestra[otel]'") from None
    return OTLPSpanExporter(endpoint=otlp_traces_url(endpoint), timeout=timeout_s)


def send_spans(spans: list[Any], endpoint: str) -> None:
    """POST the spans to an OTLP/HTTP collector; RuntimeError when it does not accept them."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    if otlp_exporter(endpoint).export(spans) != SpanExportResult.SUCCESS:
        raise RuntimeError(f"the OTLP endpoint {otlp_traces_url(endpoint)} did not accept the spans")
