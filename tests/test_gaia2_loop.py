"""The full proactive loop on a GAIA2 fixture with scripted models and the real ARE (scripted judge).

Mid-run, Marco's reply arrives as an ARE notification while the worker waits; the worker reports it
with revise/follow_up before any further side effect, and the orchestrator extends the same worker's
task and tools (inbox reading, calendar) with revise_task. The scenario is then judged valid.
"""

from __future__ import annotations

import json

from porchestra.config import RunConfig
from porchestra.envs.gaia2 import Gaia2Benchmark
from porchestra.envs.gaia2.benchmark import FIXTURES
from porchestra.models.scripted import ScriptedModel
from porchestra.run import Models, run_task

ASK = "Hi Marco, does Friday 2024-10-18 at 19:00 work for dinner? Alex"
FIRST_TOOLS = ["Emails__send_email", "SystemApp__wait_for_notification"]
MORE_TOOLS = FIRST_TOOLS + ["Emails__list_emails", "Calendar__add_calendar_event"]


def act(thought: str, action: str, action_input: dict) -> str:
    return f"Thought: {thought}\nAction: {json.dumps({'action': action, 'action_input': action_input})}<end_action>"


def comm(kind: str, state: str, scope: str, resource: str, request: str, raw: dict) -> str:
    return act(f"handoff: {kind}", kind, {
        "state": state,
        "action": {"type": kind, "task_scope": {"operation": scope, "object": "dinner with Marco", "details": request},
                   "resource": {"operation": "keep" if resource == "none" else "request", "object": resource,
                                "details": request},
                   "request": request, "reason": "a new notification may change the plan"},
        "evidence": {"summary": "see raw", "raw": raw}})


def orch(action: str, **params) -> str:
    return json.dumps({"action": action, "reasoning": action, "params": params})


def test_notification_follow_up_extends_worker_task_and_tools(tmp_path):
    task = Gaia2Benchmark().load_tasks({"ids": ["gaia2_fx_adaptability_dinner"]})[0]
    env = Gaia2Benchmark().make_env(task, {})
    orchestrator = ScriptedModel([
        orch("delegate_task", task_instruction="Email Marco Rossi (marco.rossi@example.com) with subject "
             f"'Dinner on Friday' and body '{ASK}', then wait for his answer.", context="", tools=FIRST_TOOLS,
             step_budget=10),
        orch("revise_task", task_scope={"operation": "expand", "object": "dinner with Marco",
                                        "details": "act on Marco's reply"},
             resource={"operation": "request", "object": "tool", "details": "inbox and calendar"},
             tools=MORE_TOOLS, instruction="Read Marco's reply in the inbox. If he proposes another time, add a "
             "one-hour calendar event 'Dinner with Marco' with attendee Marco Rossi at that time."),
        orch("finalize_task", message="Marco proposed 20:30 instead of 19:00; I added 'Dinner with Marco' on "
             "Friday 2024-10-18 20:30-21:30."),
    ], name="scripted:orchestrator")
    worker = ScriptedModel([
        act("send the question", "Emails__send_email",
            {"recipients": ["marco.rossi@example.com"], "subject": "Dinner on Friday", "content": ASK}),
        act("wait for Marco's answer", "SystemApp__wait_for_notification", {"timeout": 600}),
        comm("revise", "Email sent; a new email notification arrived and is not yet read.", "follow_up", "tool",
             "A reply from Marco arrived: allow me to read the inbox and act on it.",
             {"notification": "New email received from marco.rossi@example.com"}),
        act("read the reply", "Emails__list_emails", {"folder_name": "INBOX"}),
        act("book the proposed time", "Calendar__add_calendar_event",
            {"title": "Dinner with Marco", "start_datetime": "2024-10-18 20:30:00",
             "end_datetime": "2024-10-18 21:30:00", "attendees": ["Marco Rossi"]}),
        comm("finish", "Marco proposed 20:30; 'Dinner with Marco' added 20:30-21:30.", "keep", "none",
             "done", {"reply": "Could we do 20:30 instead?"}),
    ], name="scripted:worker")
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    result = run_task(task, env, cfg, out_dir=tmp_path, models=Models(orchestrator, {"default": worker}))

    assert result.success is True, result.reason
    events = [json.loads(x) for x in result.events_path.read_text().splitlines()]
    kinds = [e["event"] for e in events]
    notes = [e for e in events if e["event"] == "notification"]
    assert any("marco.rossi@example.com" in e["text"] for e in notes)
    follow = [e for e in events if e["event"] == "report" and e["task_scope"]["operation"] == "follow_up"]
    assert len(follow) == 1 and follow[0]["type"] == "revise"
    # no side effect between the notification and the follow-up report
    i_note = kinds.index("notification")
    assert "tool_call" not in kinds[i_note:kinds.index("report")]
    rev = [e for e in events if e["event"] == "revise"]
    assert len(rev) == 1 and rev[0]["agent_id"] == follow[0]["agent_id"]  # the same worker goes on
    assert set(rev[0]["harness"]["tools"]) == set(MORE_TOOLS)
    assert kinds.count("delegate") == 1
    calls = [e["tool"] for e in events if e["event"] == "tool_call"]
    assert calls == FIRST_TOOLS + ["Emails__list_emails", "Calendar__add_calendar_event"]
    end = [e for e in events if e["event"] == "task_end"][0]
    assert end["success"] is True and end["totals"]["workers"] == 1
