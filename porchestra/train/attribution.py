"""Attribution: the generative reward model of paper Appendix F.3.

For every delegation and revision decision, a frozen model reads (decision-time context, target
decision, subsequent worker trace) and answers {"needs_repair": bool, "hint": str}. FLAG=true with a
non-empty hint puts the decision into the OPD set with H_t = hint. Uncertain or unparseable answers
count as false and their status is recorded.

Truncation policy (long contexts and traces; character budgets, stated in every result):
- each trace event is rendered on its own and cut to `event_chars` characters;
- if the rendered trace exceeds `trace_chars`, the first quarter of the budget is filled from the
  head of the trace, the rest from its tail, and "[... N events omitted ...]" marks the gap (the
  beginning shows what the decision set up, the end shows where the worker got to);
- the decision-time context keeps its first message (the system prompt) cut to a quarter of
  `context_chars`, then as many of the latest messages as fit, each cut to the remaining budget.

Caching: every finished unit is appended to `<out>.cache.jsonl` keyed by a hash of the model spec
and the exact prompt; a rerun skips cached units (resume after a crash) and re-asks failed calls.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from ..log.events import read_events
from ..models.base import Model, ModelError
from ..models.gateway import Gateway
from ..parsing import extract_json_objects
from ..prompting import PromptSet
from .jsonl import dumps, read_jsonl, write_jsonl_atomic
from .records import DecisionRecord, collect_records, worker_trace

ATTRIBUTION_FORMAT = "porchestra.attribution.v1"
# The output the F.3 prompt asks for, as a structured-output schema: remote models get it as their
# response format (json_schema, stepping down like every role), local ones decode under its grammar.
ATTRIBUTION_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["needs_repair", "hint"],
                      "properties": {"needs_repair": {"type": "boolean"}, "hint": {"type": "string"}}}
TARGET_TYPES = ("delegate", "revise")


class Truncation(BaseModel):
    context_chars: int = 16000
    trace_chars: int = 12000
    event_chars: int = 1000


class Attribution(BaseModel):
    format: str = ATTRIBUTION_FORMAT
    decision_id: str
    decision_type: str
    needs_repair: bool
    hint: str
    status: str  # ok | uncertain | unparseable | error
    raw: str | None = None
    model: str
    cache_key: str
    context_truncated: bool = False
    trace_truncated: bool = False
    error: str | None = None


def parse_attribution(text: str | None) -> tuple[bool, str, str]:
    """(needs_repair, hint, status). Only an explicit true with a non-empty hint flags a decision."""
    if not text:
        return False, "", "unparseable"
    objs = [o for o in extract_json_objects(text) if "needs_repair" in o]
    if not objs:
        return False, "", "unparseable"
    flags = {json.dumps(o.get("needs_repair")) for o in objs}
    if len(flags) > 1:  # contradicting answers in one reply
        return False, "", "uncertain"
    obj = objs[0]
    flag, hint = obj.get("needs_repair"), obj.get("hint", "")
    if isinstance(flag, str) and flag.strip().lower() in ("true", "false"):
        flag = flag.strip().lower() == "true"
    if flag is False:
        return False, "", "ok"
    if flag is True and isinstance(hint, str) and hint.strip():
        return True, hint.strip(), "ok"
    return False, "", "uncertain"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 20)] + f" …[+{len(text) - n + 20} chars]"


def render_context(messages: list[dict[str, Any]], budget: int) -> tuple[str, bool]:
    blocks = [f"[{m.get('role')}]\n{m.get('content') or ''}" for m in messages]
    full = "\n\n".join(blocks)
    if len(full) <= budget or not blocks:
        return full, False
    head = _cut(blocks[0], budget // 4)
    room, tail = budget - len(head), []
    for b in reversed(blocks[1:]):
        if room <= 200:
            break
        piece = _cut(b, room)
        tail.insert(0, piece)
        room -= len(piece) + 2
    skipped = len(blocks) - 1 - len(tail)
    mid = [f"[... {skipped} earlier messages omitted ...]"] if skipped else []
    return "\n\n".join([head, *mid, *tail]), True


def render_event(ev: dict[str, Any]) -> str:
    kind, who = ev.get("event"), ev.get("agent_id")
    if kind == "llm_call" and ev.get("role") == "orchestrator":
        return f"[MainAgent response] {ev.get('response')}"
    if kind == "llm_call":
        return f"[{who} reply] {ev.get('response')}"
    if kind == "tool_call":
        out = ev.get("output")
        text = out.get("text") if isinstance(out, dict) else out
        status = "ok" if ev.get("ok") else f"error: {ev.get('error')}"
        return f"[{who} tool {ev.get('tool')}({json.dumps(ev.get('args'), ensure_ascii=False)}) {status}] {text or ''}"
    if kind == "report":
        keep = {k: ev.get(k) for k in ("state", "request", "reason", "task_scope", "resource", "evidence")}
        return f"[{who} report {ev.get('type')}] {json.dumps(keep, ensure_ascii=False)}"
    if kind == "delegate":
        return f"[MainAgent delegated {who}] harness={json.dumps(ev.get('harness'), ensure_ascii=False)}"
    if kind == "revise":
        return f"[MainAgent revised {who}] {json.dumps(ev.get('revision'), ensure_ascii=False)}"
    if kind == "terminate":
        return f"[{who} terminated] {ev.get('reason', '')}"
    if kind == "task_end":
        return f"[task ended] success={ev.get('success')} reason={ev.get('reason', '')}"
    rest = {k: v for k, v in ev.items() if k not in ("v", "ts", "run_id", "task_id", "parent_agent_id")}
    return f"[{kind}] {json.dumps(rest, ensure_ascii=False)}"


def render_trace(events: list[dict[str, Any]], trunc: Truncation) -> tuple[str, bool]:
    # a worker's raw reply repeats what its tool_call / report event states: keep the structured one
    events = [e for e in events if not (e.get("event") == "llm_call" and e.get("role") == "worker")]
    lines = [_cut(render_event(e), trunc.event_chars) for e in events]
    if sum(len(x) + 1 for x in lines) <= trunc.trace_chars:
        return "\n".join(lines) or "(no subsequent trace)", False
    head, used = [], 0
    for x in lines:
        if used + len(x) + 1 > trunc.trace_chars // 4:
            break
        head.append(x)
        used += len(x) + 1
    tail: list[str] = []
    for x in reversed(lines[len(head):]):
        if used + len(x) + 1 > trunc.trace_chars:
            break
        tail.insert(0, x)
        used += len(x) + 1
    gap = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"[... {gap} events omitted ...]", *tail]), True


def attribution_prompt(rec: DecisionRecord, events: list[dict[str, Any]], trunc: Truncation,
                       prompts: PromptSet) -> tuple[list[dict[str, str]], bool, bool]:
    trace = [e for _, e in worker_trace(events, rec.trace.decision_line - 1, rec.trace.worker_ids)]
    context, ctx_cut = render_context(rec.messages, trunc.context_chars)
    trace_text, trace_cut = render_trace(trace, trunc)
    user = prompts.render("attribution_user.j2", context=context, decision=rec.decision,
                          decision_type=rec.decision_type, trace=trace_text)
    return ([{"role": "system", "content": prompts.render("attribution_system.j2")},
             {"role": "user", "content": user}], ctx_cut, trace_cut)


def attribute(paths: list[str | Path], model: Model, gateway: Gateway, out: str | Path,
              trunc: Truncation | None = None, progress: Callable[[int, int], None] | None = None,
              max_tokens: int = 256) -> list[Attribution]:
    """Attribute every valid delegation/revision decision found under `paths`; write `out` atomically."""
    trunc = trunc or Truncation()
    prompts = PromptSet("attribution")
    out = Path(out)
    cache_path = out.with_name(out.name + ".cache.jsonl")
    cache = {r["cache_key"]: r for r in (read_jsonl(cache_path) if cache_path.is_file() else [])
             if r.get("status") != "error"}
    records = [r for r in collect_records(paths) if r.valid and r.decision_type in TARGET_TYPES]
    events_by_file: dict[str, list[dict[str, Any]]] = {}
    results: list[Attribution] = []
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    with cache_path.open("a", encoding="utf-8") as cache_fh:
        for n, rec in enumerate(records):
            events = events_by_file.setdefault(rec.trace.events, read_events(rec.trace.events))
            messages, ctx_cut, trace_cut = attribution_prompt(rec, events, trunc, prompts)
            key = hashlib.sha256((model.name + "\0schema-v1\0" + json.dumps(messages)).encode()).hexdigest()[:32]
            if key in cache:
                results.append(Attribution.model_validate({**cache[key], "decision_id": rec.decision_id}))
            else:
                res = _ask(rec, model, gateway, messages, key, ctx_cut, trace_cut, max_tokens)
                results.append(res)
                if res.status != "error":  # failed calls are asked again on the next run
                    cache[key] = res.model_dump(mode="json")
                    cache_fh.write(dumps(cache[key]) + "\n")
                    cache_fh.flush()
            if progress:
                progress(n + 1, len(records))
    write_jsonl_atomic(out, results)
    return results


def _ask(rec: DecisionRecord, model: Model, gateway: Gateway, messages: list[dict[str, str]], key: str,
         ctx_cut: bool, trace_cut: bool, max_tokens: int) -> Attribution:
    base = dict(decision_id=rec.decision_id, decision_type=rec.decision_type, model=model.name,
                cache_key=key, context_truncated=ctx_cut, trace_truncated=trace_cut)
    try:
        call = gateway.call(model, messages, role="attributor", agent_id="attributor",
                            component="attribution", schema=ATTRIBUTION_SCHEMA, max_tokens=max_tokens,
                            decision_id=rec.decision_id)
    except ModelError as e:
        return Attribution(**base, needs_repair=False, hint="", status="error", error=str(e)[:500])
    flag, hint, status = parse_attribution(call.text)
    return Attribution(**base, needs_repair=flag, hint=hint, status=status, raw=call.text)


def read_attributions(path: str | Path) -> dict[str, Attribution]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--attributions: no such file {p}")
    try:
        return {a.decision_id: a for a in (Attribution.model_validate(r) for r in read_jsonl(p))}
    except ValueError as e:
        raise ValueError(f"--attributions {p}: not an attribution file ({str(e)[:200]})") from None
