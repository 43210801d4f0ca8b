"""Event log → OpenTelemetry spans following the GenAI semantic conventions.

    invoke_agent orchestrator                      (root; gen_ai.operation.name = invoke_agent)
    ├── chat <model>                               one per orchestrator LLM call, gen_ai.usage.*
    └── invoke_agent worker-N                      from its delegation to its last event
        ├── chat <model>                           one per worker LLM call
        └── execute_tool <tool>                    gen_ai.tool.name, error status when it failed
Reports, revisions, faults and format errors are span events on the agent's span. Times come from
the log (`ts`, and `latency_ms` for LLM calls). Needs the optional `opentelemetry-sdk`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def _ns(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1e9)


def _require():
    import importlib.util

    try:
        found = importlib.util.find_spec("opentelemetry.sdk") is not None
    except ModuleNotFoundError:  # no `opentelemetry` package at all
        found = False
    if not found:
        raise RuntimeError("OpenTelemetry export needs the optional dependency: pip install opentelemetry-sdk")


def export_spans(events: list[dict[str, Any]], exporter: Any = None) -> list[Any]:
    """Build the spans and hand them to `exporter` (default: kept in memory); returns finished spans."""
    _require()
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "porchestra"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("porchestra.export")
    if not events:
        return []
    start = next((e for e in events if e["event"] == "task_start"), events[0])
    run_id, first, last = start.get("run_id", ""), _ns(events[0]["ts"]), _ns(events[-1]["ts"])
    cfg = start.get("config") or {}
    root = tracer.start_span("invoke_agent orchestrator", start_time=first, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orchestrator", "gen_ai.agent.id": run_id,
        "gen_ai.conversation.id": run_id, "gen_ai.request.model": cfg.get("orchestrator_model") or "",
        "porchestra.task_id": start.get("task_id", ""), "porchestra.mode": cfg.get("mode") or ""})
    root_ctx = trace.set_span_in_context(root)
    last_index: dict[str, int] = {}  # a worker's span ends with its last event
    for i, e in enumerate(events):
        if e.get("agent_id", "") != "orchestrator":
            last_index[e.get("agent_id", "")] = i
    agents: dict[str, Any] = {"orchestrator": root}
    prev: dict[str, int] = {}
    for i, e in enumerate(events):
        kind, agent, t = e["event"], e.get("agent_id", "orchestrator"), _ns(e["ts"])
        if kind == "delegate":
            h = e.get("harness") or {}
            agents[agent] = tracer.start_span(f"invoke_agent {agent}", context=root_ctx, start_time=t, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "gen_ai.agent.id": f"{run_id}/{agent}",
                "gen_ai.conversation.id": run_id, "gen_ai.request.model": e.get("model_name") or "",
                "porchestra.subgoal": h.get("subgoal", ""), "porchestra.tools": list(h.get("tools") or []),
                "porchestra.step_budget": int(h.get("step_budget") or 0)})
        parent = agents.get(agent, root)
        ctx = trace.set_span_in_context(parent)
        if kind == "llm_call":
            u = e.get("usage") or {}
            begin = t - int(float(e.get("latency_ms") or 0) * 1e6)
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": e.get("model") or "",
                     "gen_ai.response.model": e.get("model") or "", "gen_ai.agent.name": agent,
                     "gen_ai.usage.input_tokens": int(u.get("input") or 0),
                     "gen_ai.usage.output_tokens": int(u.get("output") or 0),
                     "porchestra.role": e.get("role") or "", "porchestra.component": e.get("component") or "",
                     "porchestra.step": int(e.get("step") or 0)}
            if e.get("cost_usd") is not None:
                attrs["porchestra.cost_usd"] = float(e["cost_usd"])
            span = tracer.start_span(f"chat {e.get('model')}", context=ctx, start_time=begin, attributes=attrs)
            if e.get("error"):
                span.set_status(Status(StatusCode.ERROR, str(e["error"])[:200]))
            span.end(end_time=t)
        elif kind == "tool_call":
            span = tracer.start_span(f"execute_tool {e.get('tool')}", context=ctx, start_time=prev.get(agent, t),
                                     attributes={"gen_ai.operation.name": "execute_tool",
                                                 "gen_ai.tool.name": e.get("tool") or "",
                                                 "gen_ai.tool.call.id": f"{agent}-s{e.get('step')}",
                                                 "gen_ai.tool.call.arguments": json.dumps(e.get("args"), ensure_ascii=False),
                                                 "porchestra.refused": bool(e.get("refused"))})
            if not e.get("ok"):
                span.set_status(Status(StatusCode.ERROR, str(e.get("error"))[:200]))
            span.end(end_time=t)
        elif kind in ("report", "revise", "fault", "format_error", "terminate", "complete", "notification"):
            attrs = {k: (v if isinstance(v, (str, int, float, bool)) else json.dumps(v, ensure_ascii=False))
                     for k, v in e.items() if k not in ("v", "ts", "run_id", "task_id", "event") and v is not None}
            parent.add_event(kind, attributes=attrs, timestamp=t)
        prev[agent] = t
        if last_index.get(agent) == i and agent in agents and agent != "orchestrator":
            agents.pop(agent).end(end_time=t)  # the worker's last event
    end = next((e for e in reversed(events) if e["event"] == "task_end"), None)
    if end is not None:
        root.set_attribute("porchestra.success", str(end.get("success")))
        if end.get("success") is False:
            root.set_status(Status(StatusCode.ERROR, str(end.get("reason"))[:200]))
    for span in list(agents.values())[1:]:
        span.end(end_time=last)
    root.end(end_time=last)
    provider.shutdown()
    return list(memory.get_finished_spans())


def spans_to_json(spans: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(s.to_json(indent=None)) for s in spans]
