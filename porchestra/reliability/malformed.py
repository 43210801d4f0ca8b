"""Property 1 — malformed model output: zero crashes, a format_error (or, for refused tool calls, a
`tool_call` with ok=false) plus a corrective observation for every item, and K consecutive malformed
replies end the agent cleanly with the reason recorded.

Each corpus item is played by a scripted model inside a real episode over :class:`VaultEnv`: once
followed by a valid reply (the agent must recover and the task succeed), and in groups of K with no
valid reply (the agent must end cleanly). Worker items with prompt injection or control characters
are also fed back as a tool result (`echo`): the injected action must not take effect, and no control
character may reach the console.
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from ..config import Budgets, RunConfig
from ..console import ConsoleView
from ..envs.base import Task
from ..log.events import read_events
from ..loop import Models
from ..models.scripted import ScriptedModel
from ..run import run_task
from .corpus import CorpusItem, build_corpus, categories
from .result import PropertyResult
from .world import call, complete, delegate, report, VaultEnv

TASK = Task(id="malformed", instruction="Report the value stored under alpha.", metadata={"answer": "17"})
CORRECTION = "Format error:"
CONTROL_OUT = [chr(c) for c in [*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)]]


def _episode(orch: list[str], work: list[str], out: Path, k: int,
             listeners: list[Any] = ()) -> tuple[list[dict[str, Any]], Any]:  # type: ignore[assignment]
    cfg = RunConfig(orchestrator_model="scripted:o", worker_model="scripted:w",
                    budgets=Budgets(max_format_errors=k, worker_steps=8, global_steps=60))
    models = Models(ScriptedModel(orch, "scripted:orchestrator"), {"default": ScriptedModel(work, "scripted:worker")})
    r = run_task(TASK, VaultEnv(), cfg, out_dir=out, models=models, listeners=listeners)
    return read_events(r.events_path, strict=True), r


def _calls(ev: list[dict[str, Any]], agent: str) -> list[dict[str, Any]]:
    return [e for e in ev if e["event"] == "llm_call" and e["agent_id"] == agent]


def _last_user(call_event: dict[str, Any]) -> str:
    msgs = [m for m in call_event["messages"] if m["role"] == "user"]
    return str(msgs[-1]["content"]) if msgs else ""


def check_single(item: CorpusItem, out: Path, k: int) -> str | None:
    """Run one item followed by a valid reply; None when handled as required, else what went wrong."""
    if item.role == "orchestrator":
        orch = [item.text, delegate("Find alpha", ["lookup"]), complete("17")]
        work = [call("lookup", key="alpha"), report("finish", "alpha is 17")]
    else:
        orch = [delegate("Find alpha", ["lookup", "echo"]), complete("17")]
        work = [item.text, call("lookup", key="alpha"), report("finish", "alpha is 17")]
    if item.category == "injection" and item.role == "worker":  # the same text arriving as a tool result
        work.insert(1, call("echo", text=item.text))
    console = None
    if item.category == "control_chars":  # the console must show them inert; the tool output path too
        if item.role == "worker":
            work.insert(1, call("echo", text=item.text))
        console = io.StringIO()
        listeners = [ConsoleView(Console(file=console, force_terminal=False, color_system=None, width=200),
                                 verbose=True, spinner=False)]
    ev, r = _episode(orch, work, out, k, listeners if console is not None else [])
    if console is not None and any(ch in console.getvalue() for ch in CONTROL_OUT):
        return "a control character reached the console"
    agent = "orchestrator" if item.role == "orchestrator" else "worker-1"
    if r.reason.startswith("internal_error"):
        return f"crash: {r.reason[:200]}"
    if item.expect == "format_error":
        errs = [e for e in ev if e["event"] == "format_error" and e["agent_id"] == agent]
        if len(errs) != 1:
            return f"expected 1 format_error from {agent}, got {len(errs)}"
        if not errs[0].get("error"):
            return "format_error without an error message"
    else:
        refused = [e for e in ev if e["event"] == "tool_call" and e["agent_id"] == agent and not e["ok"]]
        if len(refused) != 1 or not refused[0].get("error"):
            return f"expected 1 refused tool_call with an error, got {len(refused)}"
        if any(e["event"] == "format_error" for e in ev):
            return "a well-formed tool call was reported as a format error"
    calls = _calls(ev, agent)
    if len(calls) < 2:
        return f"{agent} was not asked again after the bad reply"
    seen = _last_user(calls[1])
    wanted = CORRECTION if item.expect == "format_error" else "Error from"
    if wanted not in seen:
        return f"no corrective observation in the next prompt (last user message: {seen[:120]!r})"
    if r.success is not True:
        return f"the episode did not recover: {r.reason}"
    if [e.get("answer") for e in ev if e["event"] == "complete"] != ["17"]:
        return "an injected action took effect"
    return None


def check_streak(items: list[CorpusItem], out: Path, k: int) -> str | None:
    """K malformed replies in a row: the agent ends cleanly and the reason is recorded."""
    role = items[0].role
    texts = [it.text for it in items]
    if role == "orchestrator":
        ev, r = _episode(texts, [], out, k)
        if not r.reason.startswith("orchestrator_failed") or f"{k} consecutive" not in r.reason:
            return f"orchestrator streak ended with {r.reason[:200]!r}"
    else:
        ev, r = _episode([delegate("Find alpha", ["lookup", "echo"]), complete("17")], texts, out, k)
        if r.reason.startswith("internal_error"):
            return f"crash: {r.reason[:200]}"
        term = [e for e in ev if e["event"] == "terminate" and e["agent_id"] == "worker-1"]
        if len(term) != 1 or f"{k} consecutive malformed replies" not in term[0]["reason"]:
            return f"worker streak: terminate events {[(e.get('reason') or '')[:80] for e in term]}"
        if sum(e["event"] == "format_error" for e in ev) != k:
            return "worker streak: wrong number of format_error events"
    end = ev[-1]
    if end["event"] != "task_end" or not end.get("reason"):
        return "no task_end with a reason"
    return None


def run_malformed(k: int = 3, workdir: str | Path | None = None, limit: int | None = None) -> PropertyResult:
    """Play the whole corpus for both roles. `limit` (tests) caps the items per role."""
    res = PropertyResult(key="malformed", title="Malformed model output")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="porchestra-rel-malformed-", dir=workdir) as tmp:
        root = Path(tmp)
        for role in ("orchestrator", "worker"):
            corpus = build_corpus(role)  # type: ignore[arg-type]
            items = corpus[:limit] if limit else corpus
            crashes = handled = format_errors = refused = 0
            for n, it in enumerate(items):
                try:
                    problem = check_single(it, root / f"{it.id}", k)
                except Exception as e:  # noqa: BLE001 — a crash is exactly what is being counted
                    problem = f"crash: {type(e).__name__}: {str(e)[:200]}"
                if problem is None:
                    handled += 1
                    format_errors += it.expect == "format_error"
                    refused += it.expect == "refused_tool"
                else:
                    crashes += problem.startswith("crash")
                    res.fail(f"{role} {it.id}: {problem}")
            streak_items = [it for it in items if it.expect == "format_error"]
            groups = [streak_items[i:i + k] for i in range(0, len(streak_items) - k + 1, k)]
            ended = 0
            for g, group in enumerate(groups):
                try:
                    problem = check_streak(group, root / f"{role}-streak-{g}", k)
                except Exception as e:  # noqa: BLE001
                    problem = f"crash: {type(e).__name__}: {str(e)[:200]}"
                if problem is None:
                    ended += 1
                else:
                    crashes += problem.startswith("crash")
                    res.fail(f"{role} streak {g}: {problem}")
            res.figures[role] = {
                "corpus_items": len(corpus), "played": len(items), "categories": categories(items),
                "handled": handled, "format_error_events": format_errors, "refused_tool_calls": refused,
                "crashes": crashes, "streaks_of_k": len(groups), "streaks_ended_cleanly": ended}
        res.figures["k"] = k
    res.seconds = round(time.perf_counter() - start, 1)
    return res
