"""Every protocol path of the loop, with scripted models over the project's LedgerEnv."""

from __future__ import annotations

import json

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, models, report, revise

from porchestra.config import Budgets, RunConfig
from porchestra.envs.base import Task
from porchestra.run import run_task


def run(tmp_path, task, orch, work, cfg=None, env=None):
    cfg = cfg or RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    m = models(orch, work)
    r = run_task(task, env or LedgerEnv(), cfg, out_dir=tmp_path, models=m)
    return r, events_of(r.events_path), m


def of(events, kind, **match):
    return [e for e in events if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def worker_messages(events, wid):
    calls = [e for e in events if e["event"] == "llm_call" and e["agent_id"] == wid]
    return calls[-1]["messages"]


def test_event_log_contract(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy", "total"]), complete("8")],
                   [call("buy", item="apple"), call("buy", item="pear"), report("finish", "done")])
    required = {"v", "ts", "run_id", "task_id", "step", "agent_id", "parent_agent_id", "event"}
    for e in ev:
        assert required <= e.keys() and e["v"] == 1 and e["task_id"] == "t1"
    steps = [e["step"] for e in ev]
    assert steps == sorted(steps)
    llm = of(ev, "llm_call")
    assert all({"role", "model", "messages", "response", "usage", "cost_usd", "latency_ms"} <= e.keys() for e in llm)
    assert of(ev, "delegate")[0]["agent_id"] == "worker-1"
    assert of(ev, "delegate")[0]["harness"]["tools"] == ["buy", "total"]
    end = ev[-1]
    assert end["event"] == "task_end" and end["success"] is True
    assert set(end["totals"]["cost_by_component"]) == {"orchestration", "communication", "execution"}
    assert end["totals"]["workers"] == 1 and end["totals"]["llm_calls"] == len(llm)


@pytest.mark.parametrize("dimension", ["task_scope", "context", "tools", "budget"])
def test_revise_resumes_same_worker_with_grant(tmp_path, ledger_task, dimension):
    grants = {
        "task_scope": dict(task_scope={"operation": "expand", "object": "pear", "details": "also pear"},
                           instruction="buy an apple and a pear"),
        "context": dict(resource={"operation": "request", "object": "context", "details": ""},
                        context="The second item is a pear."),
        "tools": dict(resource={"operation": "request", "object": "tool", "details": ""}, tools=["buy", "total"]),
        "budget": dict(resource={"operation": "request", "object": "budget", "details": ""}, step_budget=3),
    }[dimension]
    tools = ["buy"] if dimension == "tools" else ["buy", "total"]
    budget = 2 if dimension == "budget" else None
    work = [call("buy", item="apple"), report("revise", "bought apple", f"need {dimension}"),
            call("buy", item="pear"), call("total"), report("finish", "total 8")]
    r, ev, m = run(tmp_path, ledger_task, [delegate("buy an apple", tools, budget), revise(**grants), complete("8")],
                   work)
    assert r.success is True, r.reason
    assert len(of(ev, "delegate")) == 1  # no new worker: the same one resumed
    rev = of(ev, "revise")[0]
    assert rev["agent_id"] == "worker-1"
    after_revise = [e for e in ev if e["step"] > rev["step"] and e["event"] == "tool_call"]
    assert after_revise and all(e["agent_id"] == "worker-1" for e in after_revise)
    # history intact: the worker's last prompt still holds its first observation and the revision record
    msgs = worker_messages(ev, "worker-1")
    text = "\n".join(x["content"] for x in msgs)
    assert "bought apple" in text and "[Communication from MainAgent: revise_task]" in text
    h = rev["harness"]
    if dimension == "task_scope":
        assert h["subgoal"] == "buy an apple and a pear"
    if dimension == "context":
        assert "pear" in h["context"] and "The second item is a pear." in text
    if dimension == "tools":
        assert h["tools"] == ["buy", "total"] and of(ev, "tool_call", tool="total")[0]["ok"] is True
    if dimension == "budget":
        assert h["step_budget"] == 5  # 2 + 3 granted; the worker used 5 steps in all
        assert len(of(ev, "llm_call", role="worker")) == 5


def test_stop_then_new_delegation(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task,
                   [delegate("try plums", ["buy"]), delegate("buy apple and pear", ["buy", "total"]), complete("8")],
                   [report("stop", "plums are the wrong path"), call("buy", item="apple"), call("buy", item="pear"),
                    report("finish", "ok")])
    assert r.success is True
    assert [e["agent_id"] for e in of(ev, "delegate")] == ["worker-1", "worker-2"]
    assert of(ev, "report", agent_id="worker-1")[0]["type"] == "stop"
    # a stopped worker cannot be revised: the orchestrator was not offered revise_task
    second = of(ev, "llm_call", role="orchestrator")[1]
    assert "revise_task" not in second["messages"][1]["content"].split("Allowed actions now:")[1]


def test_terminate_then_complete(tmp_path, ledger_task):
    term = json.dumps({"action": "terminate", "reasoning": "enough", "params": {"reason": "not needed"}})
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), term, delegate("again", ["buy"]), complete("0")],
                   [report("revise", "unsure", "advice?"), report("finish", "nothing")])
    t = of(ev, "terminate")
    assert t and t[0]["agent_id"] == "worker-1" and t[0]["reason"] == "not needed" and t[0]["by"] == "orchestrator"
    assert len(of(ev, "delegate")) == 2


def test_worker_budget_exhaustion_hands_back(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"], 2), revise(step_budget=1), complete("3")],
                   [call("buy", item="apple"), call("buy", item="apple"), call("price", item="pear")])
    llm_orch = of(ev, "llm_call", role="orchestrator")
    assert "used its whole step budget" in llm_orch[1]["messages"][1]["content"]
    assert len(of(ev, "llm_call", role="worker")) == 3
    assert of(ev, "revise")[0]["harness"]["step_budget"] == 3


def test_budget_warning_near_the_end(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"], 4), complete("3")],
                   [call("buy", item="apple")] * 2 + [report("finish", "x")])
    msgs = worker_messages(ev, "worker-1")
    assert "only 2 step(s) left" in msgs[-1]["content"]


def test_global_budget_exhaustion_ends_cleanly(tmp_path, ledger_task):
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json",
                    budgets=Budgets(global_steps=4))
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), complete("3")],
                   [call("buy", item="apple")] * 10, cfg=cfg)
    assert r.reason.startswith("budget_exhausted") and r.success is False
    assert ev[-1]["event"] == "task_end" and ev[-1]["totals"]["steps"] == 4


def test_tool_outside_harness_is_refused(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), complete("3")],
                   [call("total"), call("nope"), report("finish", "x")])
    t = of(ev, "tool_call")
    assert [e["refused"] for e in t] == [True, True] and not any(e["ok"] for e in t)
    assert "not in your harness" in t[0]["error"] and "does not exist" in t[1]["error"]


@pytest.mark.parametrize("bad", [
    "not json at all", '{"action": "buy", "params": ', '{"action": "fly", "params": {}}',
    '{"action": "buy", "params": {"item": 5}}', '{"action": "buy", "params": "apple"}',
    '{"action": "revise", "params": {"action": {"type": "finish"}}}',
    '{"action": "buy", "params": {"item": "apple"}} {"action": "buy", "params": {"item": "pear"}}'])
def test_worker_malformed_outputs_are_corrected(tmp_path, bad):
    apple = Task(id="t2", instruction="Buy an apple and report the total.", metadata={"items": ["apple"]})
    r, ev, _ = run(tmp_path, apple, [delegate("buy", ["buy"]), complete("3")],
                   [bad, call("buy", item="apple"), report("finish", "ok")])
    fe = of(ev, "format_error") + [e for e in of(ev, "tool_call") if not e["ok"]]
    assert fe, "the malformed reply must be recorded"
    assert r.success is True  # the same worker recovered after the corrective observation


def test_k_consecutive_worker_errors_end_the_worker(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), complete("0")], ["garbage"] * 3)
    assert len(of(ev, "format_error")) == 3
    t = of(ev, "terminate")[0]
    assert t["agent_id"] == "worker-1" and "consecutive malformed" in t["reason"]


@pytest.mark.parametrize("bad", ["hello", '{"action": "launch"}', '{"action": "delegate_task", "params": {}}',
                                 '{"action": "delegate_task", "params": {"task_instruction": "x", "tools": ["laser"]}}',
                                 '{"action": "revise_task", "params": {}}'])
def test_orchestrator_malformed_then_recovers(tmp_path, ledger_task, bad):
    r, ev, _ = run(tmp_path, ledger_task, [bad, delegate("buy", ["buy", "total"]), complete("8")],
                   [call("buy", item="apple"), call("buy", item="pear"), report("finish", "ok")])
    assert of(ev, "format_error", agent_id="orchestrator")
    assert r.success is True
    retry = of(ev, "llm_call", role="orchestrator")[1]["messages"]
    assert retry[-1]["role"] == "user" and "Format error" in retry[-1]["content"]


def test_orchestrator_k_errors_end_task(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, ["x", "y", "z"], [])
    assert r.reason.startswith("orchestrator_failed") and ev[-1]["event"] == "task_end"


def test_scripted_model_running_out_ends_cleanly(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"])], [call("buy", item="apple")])
    assert r.reason.startswith("model_exhausted") and ev[-1]["event"] == "task_end"
    assert ev[-1]["success"] is False


def test_notifications_reach_the_active_worker(tmp_path, ledger_task):
    env = LedgerEnv(events=["user: also buy a pear"])
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), revise(instruction="buy a pear too"),
                                           complete("8")],
                   [call("buy", item="apple"), report("revise", "notification", "follow up", scope="follow_up"),
                    call("buy", item="pear"), report("finish", "ok")], env=env)
    assert of(ev, "notification")[0]["agent_id"] == "worker-1"
    first_obs = worker_messages(ev, "worker-1")[3]
    assert first_obs["role"] == "user" and "user: also buy a pear" in first_obs["content"]
    assert of(ev, "report")[0]["task_scope"]["operation"] == "follow_up"
    assert r.success is True


def test_unknown_price_is_null_not_zero(tmp_path, ledger_task):
    from porchestra.models.scripted import ScriptedModel
    from porchestra.run import Models

    o = ScriptedModel([delegate("buy", ["buy"]), complete("3")], name="openai:mystery-model")
    w = ScriptedModel([call("buy", item="apple"), report("finish", "ok")], name="scripted:w")
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=Models(o, {"default": w}))
    ev = events_of(r.events_path)
    assert all(e["cost_usd"] is None for e in of(ev, "llm_call", role="orchestrator"))
    assert r.totals["cost_usd"] is None and r.totals["unpriced_calls"] == 2
    assert r.totals["cost_by_component"]["execution"] == 0.0


def test_revision_component_is_communication(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), revise(tools=["buy", "total"]), complete("3")],
                   [report("revise", "need total", "total tool", resource="tool"), call("total"),
                    report("finish", "ok")])
    comps = [(e["role"], e["component"]) for e in of(ev, "llm_call")]
    assert comps == [("orchestrator", "orchestration"), ("worker", "communication"),
                     ("orchestrator", "communication"), ("worker", "execution"), ("worker", "execution"),
                     ("orchestrator", "orchestration")]


def test_hint_slot_recorded_and_insertable(tmp_path, ledger_task):
    from porchestra.prompting import HINT_HEADER, insert_hint

    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), complete("3")],
                   [call("buy", item="apple"), report("finish", "ok")])
    first = of(ev, "llm_call", role="orchestrator")[0]
    assert first["decision"] == "delegate_task" and first["hint_slot"]["message_index"] == 1
    teacher = insert_hint(first["messages"], first["hint_slot"], "Give the worker the total tool.")
    assert HINT_HEADER in teacher[1]["content"] and HINT_HEADER not in first["messages"][1]["content"]
    assert teacher[1]["content"].replace("\n" + HINT_HEADER + "\nGive the worker the total tool.\n", "") == \
        first["messages"][1]["content"]


def test_end_action_requires_a_delegation_first(tmp_path, ledger_task):
    r, ev, _ = run(tmp_path, ledger_task, [complete("8"), delegate("buy", ["buy"]), complete("3")],
                   [call("buy", item="apple"), report("finish", "ok")])
    assert "Unknown or unavailable action 'complete'" in of(ev, "format_error")[0]["error"]


def test_environment_default_budgets_apply_unless_set(tmp_path, ledger_task):
    from porchestra.config import load_config
    from porchestra.run import with_env_budgets

    env = LedgerEnv()
    env.default_budgets = {"global_steps": 500, "worker_steps": 50}
    cfg = with_env_budgets(load_config(None, {"budgets.worker_steps": 7}), env)
    assert cfg.budgets.global_steps == 500 and cfg.budgets.worker_steps == 7
    r, ev, _ = run(tmp_path, ledger_task, [delegate("buy", ["buy"]), complete("3")],
                   [call("buy", item="apple"), report("finish", "ok")], env=env)
    assert ev[0]["config"]["budgets"]["global_steps"] == 500
