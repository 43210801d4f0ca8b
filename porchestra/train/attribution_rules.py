"""A rule-based attributor, clearly labelled as such: hindsight hints derived from what the workers
themselves said and hit, with no model involved (`porchestra attribute --rules`).

The paper's attributor is a generative reward model (F.3, attribution.py). A small model may not be
able to play that role; these rules stand in for it where the evidence is explicit in the trace, and
their results carry `model: "rules:revise-requests"` so nobody mistakes them for the GRM's.

For a delegation, the worker trace that followed it is read for
- revise requests that ask for a resource (a tool) or a scope change: the harness did not fit;
- tool calls the harness refused (a tool the worker needed but was not given);
- rejected arguments the context should have settled (e.g. an invalid discount code).
For a revision, the report it answered is compared with what it granted: a requested tool that the
revision left out flags it. A decision that answers a worker's revise request with anything but a
revision (e.g. `complete` while the worker waits for a tool) is a revision decision gone wrong and is
flagged too -- the F.3 GRM only reads delegations and revisions, and this is one that was not made.
Each finding becomes one sentence of the hint; no finding, no flag.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ..log.events import read_events
from .attribution import TARGET_TYPES, Attribution
from .jsonl import write_jsonl_atomic
from .records import DecisionRecord, collect_records, worker_trace

RULES_MODEL = "rules:revise-requests"


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def known_tools(events: list[dict[str, Any]]) -> set[str]:
    """Tool names the run shows: called, put in a harness, or named in a tool's error message."""
    names: set[str] = set()
    for ev in events:
        if ev.get("event") == "tool_call":
            names.add(str(ev.get("tool")))
            names.update(w for w in _WORD.findall(str(ev.get("error") or "")) if "_" in w)
        elif ev.get("event") in ("delegate", "revise"):
            h = ev.get("harness") or ev.get("revision") or {}
            names.update(str(t) for t in h.get("tools") or [])
    return names


def _requested_tool(report: dict[str, Any], known: set[str] | None = None) -> str | None:
    """The tool a revise report asks for: the first known tool name in its resource details (a small
    model's details are often a sentence), else the details' first identifier."""
    res = report.get("resource") or {}
    if res.get("operation") != "request" or str(res.get("object", "")).lower() not in ("tool", "tools"):
        return None
    words = _WORD.findall(str(res.get("details") or ""))
    return next((w for w in words if known and w in known), words[0] if words else None)


def _granted(revise_ev: dict[str, Any]) -> set[str]:
    # A revision's `tools` is the worker's new tool set; absent, the old set (which lacked it) stays.
    return {str(t) for t in (revise_ev.get("revision") or {}).get("tools") or [] if t}


def _findings_after_delegation(trace: list[tuple[int, dict[str, Any]]], known: set[str]) -> list[str]:
    out: list[str] = []
    asked: set[str] = set()  # a tool asked for again: one sentence is enough
    for _, ev in trace:
        kind = ev.get("event")
        if kind == "report" and ev.get("type") == "revise":
            tool = _requested_tool(ev, known)
            request = str(ev.get("request") or ev.get("reason") or "").strip()
            if tool and tool not in asked:
                asked.add(tool)
                out.append(f"the worker had to stop and ask for the tool {tool} ({request[:160]}); "
                           f"include {tool} in its tools from the start")
            elif not tool and (ev.get("task_scope") or {}).get("operation") not in (None, "keep"):
                out.append(f"the worker had to ask for a scope change ({request[:160]}); state that scope "
                           "in the subgoal")
        elif kind == "tool_call" and ev.get("refused"):
            out.append(f"the worker needed the tool {ev.get('tool')}, which its harness did not allow; "
                       f"include {ev.get('tool')} in its tools")
        elif kind == "tool_call" and not ev.get("ok") and "invalid" in str(ev.get("error") or "").lower():
            out.append(f"the worker's call {ev.get('tool')}({json.dumps(ev.get('args'))}) was rejected "
                       f"({str(ev.get('error'))[:120]}); put the exact value from the task into its context")
    return out


def _answered_report(events: list[dict[str, Any]], rec: DecisionRecord) -> dict[str, Any] | None:
    """The last report of the worker this decision answers, before the decision."""
    wid = (rec.handoff or {}).get("worker_id")
    before = events[:rec.trace.decision_line - 1]
    return next((e for e in reversed(before) if e.get("event") == "report" and e.get("agent_id") == wid), None)


def _findings_after_revision(events: list[dict[str, Any]], rec: DecisionRecord, known: set[str]) -> list[str]:
    report = _answered_report(events, rec)
    tool = _requested_tool(report, known) if report else None
    if not tool:
        return []
    revise = next((e for e in events[rec.trace.decision_line:] if e.get("event") in ("revise", "llm_call")), None)
    granted = _granted(revise) if revise is not None and revise.get("event") == "revise" else set()
    if tool in granted:
        return []
    return [f"the worker asked for the tool {tool}; the revision must grant it (put {tool} in tools)"]


def _findings_unanswered_request(events: list[dict[str, Any]], rec: DecisionRecord, known: set[str]) -> list[str]:
    report = _answered_report(events, rec)
    if report is None:
        return []
    tool = _requested_tool(report, known)
    request = str(report.get("request") or report.get("reason") or "").strip()[:160]
    grant = f" granting the tool {tool}" if tool else ""
    return [f"the worker was waiting on its revise request ({request}); answer it with revise_task{grant} "
            f"instead of {rec.action}"]


def rule_attributions(paths: list[str | Path], out: str | Path) -> list[Attribution]:
    """Attribute every valid delegation/revision decision under `paths` by the rules above."""
    logs: dict[str, tuple[list[dict[str, Any]], set[str]]] = {}  # events file -> (events, known tools)
    results = []
    for rec in collect_records(paths):
        answers_request = (rec.handoff or {}).get("report_type") == "revise"
        if not rec.valid or (rec.decision_type not in TARGET_TYPES and not answers_request):
            continue
        if rec.trace.events not in logs:  # read and scanned once per trajectory, not per decision
            events = read_events(rec.trace.events)
            logs[rec.trace.events] = (events, known_tools(events))
        events, known = logs[rec.trace.events]
        if rec.decision_type not in TARGET_TYPES:
            findings = _findings_unanswered_request(events, rec, known)
        elif rec.decision_type == "delegate":
            findings = _findings_after_delegation(
                worker_trace(events, rec.trace.decision_line - 1, rec.trace.worker_ids), known)
        else:
            findings = _findings_after_revision(events, rec, known)
        findings = list(dict.fromkeys(findings))  # one sentence per distinct finding
        hint = ("In hindsight: " + "; ".join(findings) + ".") if findings else ""
        key = hashlib.sha256(f"{RULES_MODEL}\n{rec.decision_id}\n{rec.decision}".encode()).hexdigest()[:16]
        results.append(Attribution(decision_id=rec.decision_id, decision_type=rec.decision_type,
                                   needs_repair=bool(findings), hint=hint, status="ok", model=RULES_MODEL,
                                   cache_key=key))
    write_jsonl_atomic(Path(out), results)
    return results
