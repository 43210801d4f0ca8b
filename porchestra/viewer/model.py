"""Event log → view entries: one entry per event worth showing, with a title and typed details.
The template renders these; nothing here knows about HTML."""

from __future__ import annotations

import json
import re
from typing import Any

from ..parsing import FormatError, extract_action_object
from ..report.fmt import money

PREVIEW = 3000  # characters of long texts shown inline (the rest stays in the log)
PROMPT = 20000  # characters of one prompt message or raw reply (prompts repeat the history at every call)


def _cut(text: Any, n: int = PREVIEW) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, indent=1)
    return text if len(text) <= n else text[:n] + f"\n… ({len(text) - n} more characters)"


def _decision(response: str | None) -> dict[str, Any]:
    try:
        obj = extract_action_object(response or "")
    except FormatError:
        return {"action": None, "reasoning": "", "params": None}
    return {"action": obj.get("action"), "reasoning": obj.get("reasoning") or "", "params": obj.get("params"),
            "memory": obj.get("memory") or ""}


def _preamble(text: str | None) -> str:
    """The free text before the action (GAIA2 `Thought:`, SWE-bench `DISCUSSION`), if any."""
    text = (text or "").strip()
    head = text.split("{", 1)[0].split("COMMAND", 1)[0].split("Action:", 1)[0].strip()
    return _cut(head, 800) if head and head != text else ""


def _pretty(text: Any) -> str:
    """A tool output that is a JSON object or list, indented; anything else as it is."""
    if isinstance(text, str) and text.lstrip()[:1] in ("{", "["):
        try:
            return _cut(json.dumps(json.loads(text), ensure_ascii=False, indent=2))
        except ValueError:
            pass
    return _cut(text)


def _content(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # content parts
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)
    return json.dumps(c, ensure_ascii=False)


def _llm_entry(base: dict[str, Any], e: dict[str, Any], agent: str) -> dict[str, Any]:
    """One model call: the decision it produced, and the exact prompt, raw reply, latency, tokens, cost."""
    d = _decision(e.get("response"))
    usage = e.get("usage") or {}
    cost = e.get("cost_usd")
    call = {"model": e.get("model"), "latency_ms": e.get("latency_ms"), "input": usage.get("input", 0),
            "output": usage.get("output", 0), "cached": usage.get("cached_input"),
            "cost": money(cost), "response": _cut(e.get("response") or "", PROMPT),
            "messages": [{"role": m.get("role", "?"), "content": _cut(_content(m.get("content")), PROMPT)}
                         for m in e.get("messages") or []],
            "malformed": d["action"] is None and not e.get("error"), "retries": len(e.get("retries") or [])}
    latency = f"{e.get('latency_ms')} ms · " if e.get("latency_ms") is not None else ""
    meta = f"{latency}{call['input']} in / {call['output']} out · {call['cost']}"
    what = d["action"] or ("model call failed" if e.get("error") else "malformed reply")
    if e.get("role") == "orchestrator":
        return {**base, "kind": "decision", "title": f"orchestrator: {what}", "reasoning": d["reasoning"],
                "params": _cut(d["params"]) if d["params"] else None, "call": call,
                "meta": f"{e.get('component', '')} · {meta}", "error": e.get("error")}
    return {**base, "kind": "thought", "title": f"{agent}: {what}", "call": call,
            "reasoning": d.get("memory") or _preamble(e.get("response")), "meta": f"{e.get('role')} · {meta}",
            "error": e.get("error"), "params": None}


def _harness_diff(before: dict[str, Any] | None, after: dict[str, Any]) -> list[dict[str, str]]:
    before = before or {}
    return [{"field": k, "before": _cut(before.get(k, "")), "after": _cut(after.get(k))}
            for k in after if before.get(k) != after.get(k)]


def entry(i: int, e: dict[str, Any]) -> dict[str, Any] | None:
    kind, agent = e["event"], e.get("agent_id", "")
    base = {"i": i, "step": e.get("step", 0), "agent": agent, "kind": kind, "ts": e.get("ts", "")}
    if kind == "task_start":
        cfg = e.get("config") or {}
        return {**base, "title": f"task {e.get('task_id')}", "text": (e.get("task") or {}).get("instruction", ""),
                "fields": {"mode": cfg.get("mode"), "orchestrator": cfg.get("orchestrator_model"),
                           "worker": cfg.get("worker_model"), "ablate": ", ".join(cfg.get("ablate") or []) or None,
                           "faults": json.dumps(cfg.get("faults")) if cfg.get("faults") else None}}
    if kind == "llm_call":
        return _llm_entry(base, e, agent)
    if kind == "delegate":
        h = e.get("harness") or {}
        return {**base, "title": f"delegate → {agent}", "reasoning": e.get("reasoning", ""),
                "fields": {"subgoal": h.get("subgoal"), "tools": ", ".join(h.get("tools") or []),
                           "step budget": h.get("step_budget"), "model": e.get("model_name"),
                           "context": _cut(h.get("context") or "") or None}}
    if kind == "tool_call":
        out = e.get("output") or {}
        return {**base, "title": f"{agent} · {e.get('tool')}", "ok": bool(e.get("ok")),
                "args": _cut(e.get("args") or {}),
                "text": _pretty(out.get("text", "")) if e.get("ok") else _cut(e.get("error"))}
    if kind == "report":
        scope, res = e.get("task_scope") or {}, e.get("resource") or {}
        ev = e.get("evidence") or {}
        return {**base, "title": f"{agent} reports: {e.get('type')}",
                "fields": {"state": e.get("state") or None, "request": e.get("request") or None,
                           "reason": e.get("reason") or None,
                           "task scope": f"{scope.get('operation')} {scope.get('object', '')} {scope.get('details', '')}".strip(),
                           "resource": f"{res.get('operation')} {res.get('object')} {res.get('details', '')}".strip(),
                           "evidence": _cut(ev.get("summary", "")) or None,
                           "evidence.raw": _cut(ev.get("raw")) if ev.get("raw") else None}}
    if kind == "revise":
        return {**base, "title": f"revise {agent}", "reasoning": (e.get("revision") or {}).get("reasoning", ""),
                "diff": _harness_diff(e.get("harness_before"), e.get("harness") or {}),
                "ignored": ", ".join(e.get("ignored") or [])}
    if kind == "fault":
        return {**base, "title": f"fault {e.get('fault_id')} ({e.get('phase', '')}): {e.get('type')} {e.get('target')}",
                "text": e.get("error") or f"trigger {e.get('trigger')}"}
    if kind in ("terminate", "format_error", "notification", "plan", "complete"):
        text = {"terminate": e.get("reason"), "format_error": e.get("error"), "notification": e.get("text"),
                "plan": _cut(e.get("subtasks")),
                "complete": e.get("answer") or e.get("message") or e.get("submission")}[kind]
        return {**base, "title": f"{kind} {agent}" if kind != "complete" else f"{e.get('action', 'complete')}",
                "text": _cut(text or "")}
    if kind == "task_end":
        return {**base, "title": f"task end: success={e.get('success')}", "text": e.get("reason", ""),
                "fields": {"score": e.get("score"), "check": e.get("check")}}
    return {**base, "title": kind, "text": _cut({k: v for k, v in e.items() if k not in base})}


def agent_costs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["event"] != "llm_call":
            continue
        r = rows.setdefault(e.get("agent_id", "?"), {"agent": e.get("agent_id", "?"), "calls": 0, "input": 0,
                                                      "output": 0, "cost": 0.0})
        u = e.get("usage") or {}
        r["calls"] += 1
        r["input"] += int(u.get("input") or 0)
        r["output"] += int(u.get("output") or 0)
        r["cost"] = None if r["cost"] is None or e.get("cost_usd") is None else r["cost"] + e["cost_usd"]
    return list(rows.values())


def natural_key(text: str) -> list[Any]:
    """worker-2 before worker-10, t2 before t10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _chip(x: dict[str, Any]) -> str:
    """The short label of an entry in its lane (the lane already names the agent)."""
    title, agent = x["title"], x["agent"]
    for prefix in (f"{agent}: ", f"{agent} · ", f"{agent} "):
        if title.startswith(prefix):
            title = title[len(prefix):]
    if x["kind"] in ("decision", "thought"):
        return f"llm → {title}"
    if x["kind"] == "tool_call":
        return f"tool {title}" + ("" if x.get("ok") else " ✗")
    return title


def lanes(entries: list[dict[str, Any]], agents: list[str]) -> list[dict[str, Any]]:
    """One row per step number, in order; in each row one cell per agent lane with that agent's entries."""
    rows: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for x in entries:
        rows.setdefault(x["step"], {}).setdefault(x["agent"], []).append(
            {"i": x["i"], "kind": x["kind"], "title": x["title"], "label": _chip(x), "bad": x.get("ok") is False or bool(x.get("error"))
             or x["kind"] in ("format_error", "fault") or bool((x.get("call") or {}).get("malformed"))})
    return [{"step": step, "cells": [cells.get(a, []) for a in agents]} for step, cells in sorted(rows.items())]


def share_prefixes(entries: list[dict[str, Any]]) -> None:
    """A worker's prompt repeats its whole history at every call: a call shows only the messages after
    the prefix it shares with the same agent's previous call, and links to that call for the rest
    (the page stays small; the exact prompt stays one click away)."""
    prev: dict[str, dict[str, Any]] = {}
    for x in entries:  # log order
        call = x.get("call")
        if not call:
            continue
        before = prev.get(x["agent"])
        k = 0
        if before is not None:
            old = before["call"]["messages"]
            while k < min(len(old), len(call["messages"])) and old[k] == call["messages"][k]:
                k += 1
        call["shared"] = k
        call["shared_with"] = None if k == 0 else {"i": before["i"], "step": before["step"]}
        prev[x["agent"]] = x


def mark_rejected(entries: list[dict[str, Any]]) -> None:
    """A reply that parsed but was refused (an action not allowed now, bad params) also became a format
    error: the call is marked like an unparsable one, with its raw reply shown open."""
    for n, x in enumerate(entries):
        call = x.get("call")
        if not call or call["malformed"]:
            continue
        nxt = next((y for y in entries[n + 1:] if y["agent"] == x["agent"]), None)
        if nxt is not None and nxt["kind"] == "format_error":
            call["malformed"] = True
            x["title"] += " (rejected)"


def episode_view(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    entries = [x for x in (entry(i, e) for i, e in enumerate(events)) if x is not None]
    share_prefixes(entries)
    mark_rejected(entries)
    # concurrent workers log out of step order; the stream reads in step order (stable: log order within a step)
    entries.sort(key=lambda x: x["step"])
    end = next((e for e in reversed(events) if e["event"] == "task_end"), None)
    final = next((e for e in reversed(events) if e["event"] == "complete"), None)
    agents = sorted({x["agent"] for x in entries}, key=lambda a: (a != "orchestrator", natural_key(a)))
    totals = (end or {}).get("totals") or {}
    task_id = events[0].get("task_id") if events else name
    return {"name": name, "task_id": task_id, "entries": entries,
            "agents": agents, "lanes": lanes(entries, agents), "costs": agent_costs(events), "end": end,
            "answer": final and (final.get("answer") or final.get("message") or final.get("submission")),
            "totals": totals,
            "sample": {"task_id": str(task_id), "success": None if end is None else end.get("success"),
                       "score": None if end is None else end.get("score"), "cost": totals.get("cost_usd"),
                       "steps": totals.get("steps"), "reason": (end or {}).get("reason", "unfinished"),
                       "finished": end is not None}}
