"""Appendix F formats parse exactly; tolerant of fences and chatter; never a different action."""

from __future__ import annotations

import json

import pytest

from porchestra.parsing import FormatError, parse_decision, parse_worker
from porchestra.protocol import DelegateTask, EndTask, Report, ReviseTask, ToolCall

COMM = {"finish", "revise", "stop"}

REVISE_F2 = {
    "action": "revise",
    "params": {
        "state": "Greenland identified; 2020 estimate unresolved.",
        "action": {"type": "revise",
                   "task_scope": {"operation": "keep", "object": "population", "details": ""},
                   "resource": {"operation": "request", "object": "tool", "details": "historical revisions"},
                   "request": "Provide access to Wikipedia revisions around 2021-01-01.",
                   "reason": "Current pages show newer figures only."},
        "evidence": {"summary": "As of 1 January 2024 ... 56,699", "raw": {"search": "56,699"}}},
    "memory": "searched 24 times"}


def test_worker_tool_call_exact():
    a = parse_worker('{"action": "read_file", "params": {"path": "a.txt"}, "memory": "m"}', COMM)
    assert a == ToolCall(tool="read_file", args={"path": "a.txt"}, memory="m")


def test_worker_revise_report_exact():
    r = parse_worker(json.dumps(REVISE_F2), COMM)
    assert isinstance(r, Report) and r.type == "revise"
    assert r.resource.object == "tool" and r.resource.operation == "request"
    assert r.request.startswith("Provide access") and r.evidence.raw == {"search": "56,699"}
    assert r.state.startswith("Greenland") and r.memory == "searched 24 times"


@pytest.mark.parametrize("wrap", [
    "```json\n{}\n```", "Sure! Here is my action:\n{}", "{}\nI hope this helps.", "<think>hmm</think> {}"])
def test_tolerant_of_fences_and_chatter(wrap):
    text = wrap.replace("{}", json.dumps(REVISE_F2))
    assert parse_worker(text, COMM).type == "revise"


def test_inner_type_must_match():
    bad = json.loads(json.dumps(REVISE_F2))
    bad["params"]["action"]["type"] = "finish"
    with pytest.raises(FormatError, match="must match"):
        parse_worker(json.dumps(bad), COMM)


def test_unavailable_comm_action_is_refused_not_guessed():
    with pytest.raises(FormatError, match="not available"):
        parse_worker(json.dumps(REVISE_F2), {"finish", "stop"})


@pytest.mark.parametrize("text,msg", [
    ("", "Empty"), ("no json here", "No JSON"), ('{"action": "x", ', "truncated"),
    ('{"params": {}}', "No JSON object with an \"action\""),
    ('{"action": "a", "params": {}} {"action": "b", "params": {}}', "Several actions"),
    ('{"action": "read_file", "params": [1, 2]}', "must be a JSON object"),
    ('{"action": 5}', "non-empty string")])
def test_worker_malformed(text, msg):
    with pytest.raises(FormatError, match=msg):
        parse_worker(text, COMM)


def test_gaia2_thought_action_wrapper():
    text = ('Thought: I should read the inbox.\nAction: {"action": "Emails__list_emails", '
            '"action_input": {"folder_name": "INBOX"}}<end_action>')
    a = parse_worker(text, COMM, "thought_action")
    assert a == ToolCall(tool="Emails__list_emails", args={"folder_name": "INBOX"}, thought="I should read the inbox.")
    comm = 'Thought: new email\nAction: ' + json.dumps({"action": "revise", "action_input": REVISE_F2["params"]}) + \
        '<end_action>'
    assert parse_worker(comm, COMM, "thought_action").type == "revise"


def test_swe_discussion_command_wrapper():
    a = parse_worker("DISCUSSION\nLook at the file.\nCOMMAND\ngrep -n foo src/x.py", COMM, "discussion_command")
    assert a == ToolCall(tool="bash", args={"command": "grep -n foo src/x.py"}, thought="Look at the file.")
    ctl = "DISCUSSION\nDone.\nCOMMAND\nfinish " + json.dumps(REVISE_F2["params"] | {
        "action": {**REVISE_F2["params"]["action"], "type": "finish"}})
    r = parse_worker(ctl, COMM, "discussion_command")
    assert isinstance(r, Report) and r.type == "finish"
    with pytest.raises(FormatError):
        parse_worker("I think we should fix it.", COMM, "discussion_command")


def test_orchestrator_formats():
    d = parse_decision('{"action": "delegate_task", "reasoning": "r", "params": {"task_instruction": "find X", '
                       '"context": "c", "tools": ["search"]}}')
    assert isinstance(d, DelegateTask) and d.model is None and d.tools == ["search"]  # model optional
    r = parse_decision(json.dumps({"action": "revise_task", "reasoning": "r", "params": {
        "executor": {"operation": "replace", "model": "m2"},
        "task_scope": {"operation": "follow_up", "object": "o", "details": "d"},
        "resource": {"operation": "request", "object": "budget", "details": ""}, "step_budget": 10}}))
    assert isinstance(r, ReviseTask) and r.step_budget == 10 and r.executor.operation == "replace"
    for action, key in [("complete", "answer"), ("finalize_task", "message"), ("submit", "reason")]:
        e = parse_decision(json.dumps({"action": action, "reasoning": "", "params": {key: "v"}}))
        assert isinstance(e, EndTask) and getattr(e, key) == "v" and e.action == action


@pytest.mark.parametrize("text,msg", [
    ('{"action": "delegate_task", "params": {"tools": ["a"]}}', "task_instruction"),
    ('{"action": "delegate_task", "params": {"task_instruction": "x", "step_budget": "lots"}}', "step_budget"),
    ('{"action": "revise_task", "params": {"task_scope": {"operation": "explode"}}}', "operation"),
    ('{"action": "fly", "params": {}}', "Unknown")])
def test_orchestrator_malformed(text, msg):
    with pytest.raises(FormatError, match=msg):
        parse_decision(text)


def test_allowed_restricts_actions():
    with pytest.raises(FormatError, match="unavailable"):
        parse_decision('{"action": "revise_task", "params": {}}', allowed={"delegate_task", "complete"})
