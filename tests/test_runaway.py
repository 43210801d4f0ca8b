"""Runaway protection (porchestra/runaway.py) through the real loop with scripted models: a worker
repeating one tool call is warned, then ended with a recorded reason; an orchestrator repeating one
decision ends the task; the wall-clock deadline ends a task with its reason."""

from __future__ import annotations

import time

from conftest import LedgerEnv, call, complete, delegate, events_of, models, report

from porchestra.config import Budgets, RunConfig
from porchestra.envs.base import Task
from porchestra.run import run_task


def _cfg(**budgets) -> RunConfig:
    return RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json",
                     budgets=Budgets(**budgets))


def test_looping_worker_is_warned_then_ended_with_the_reason(tmp_path, ledger_task):
    m = models([delegate("buy apple and pear", ["buy", "total"]), complete("0")],
               [call("total")] * 12)
    r = run_task(ledger_task, LedgerEnv(), _cfg(repeat_warn=3, max_repeats=5), out_dir=tmp_path, models=m)
    ev = events_of(r.events_path)
    tool_calls = [e for e in ev if e["event"] == "tool_call"]
    assert len(tool_calls) == 5  # ended at the 5th identical call, not at its step budget (30)
    end = [e for e in ev if e["event"] == "terminate" and e["agent_id"] == "worker-1"]
    assert len(end) == 1 and end[0]["reason"].startswith("runaway: total({}) repeated 5 times")
    flags = [e for e in ev if e["event"] == "runaway"]
    assert [(f["repeats"], f["ended"]) for f in flags] == [(3, False), (5, True)]
    # The corrective observation reached the worker's prompt after the 3rd repeat, not before.
    prompts = [e["messages"][-1]["content"] for e in ev if e["event"] == "llm_call" and e["role"] == "worker"]
    assert "Note: you have now called total({}) 3 times" in prompts[3]
    assert not any("Note: you have now called" in p for p in prompts[:3])
    # The orchestrator saw why and ended the task; the run's reason is its normal one.
    assert r.reason == "completed" and ev[-1]["event"] == "task_end"


def test_varied_actions_are_not_a_runaway(tmp_path, ledger_task):
    work = [call("total"), call("total"), call("buy", item="apple"), call("total"), call("total"),
            call("buy", item="pear"), call("total"), call("total"), report("finish", "total 8")]
    m = models([delegate("buy apple and pear", ["buy", "total"]), complete("8")], work)
    r = run_task(ledger_task, LedgerEnv(), _cfg(repeat_warn=2, max_repeats=3), out_dir=tmp_path, models=m)
    assert r.success is True, r
    assert not [e for e in events_of(r.events_path) if e["event"] == "runaway" and e["ended"]]


def test_orchestrator_repeating_itself_ends_the_task(tmp_path, ledger_task):
    # Every attempt reports the same stop and the orchestrator answers with the same delegation.
    m = models([delegate("buy apple and pear", ["buy", "total"])] * 9,
               [report("stop", "stuck", request="need a different tool")] * 9)
    r = run_task(ledger_task, LedgerEnv(), _cfg(repeat_warn=2, max_repeats=4, max_workers=10),
                 out_dir=tmp_path, models=m)
    assert r.reason.startswith("runaway: the orchestrator made the same decision 4 times"), r.reason
    ev = events_of(r.events_path)
    assert sum(e["event"] == "delegate" for e in ev) == 4  # the 5th identical decision is not executed
    assert ev[-1]["event"] == "task_end" and ev[-1]["reason"] == r.reason
    # The warning went into the orchestrator's view of the run before it was stopped.
    orch = [e for e in ev if e["event"] == "llm_call" and e["role"] == "orchestrator"]
    assert any("same decision 2 times" in str(e["messages"]) for e in orch)


class SlowLedger(LedgerEnv):
    def execute(self, call, agent_id):
        time.sleep(0.4)
        return super().execute(call, agent_id)


def test_deadline_ends_the_task_with_its_reason(tmp_path):
    task = Task(id="t", instruction="Buy an apple.", metadata={"items": ["apple"]})
    m = models([delegate("buy", ["buy", "total", "price"]), complete("3")],
               [call("price", item="apple"), call("price", item="pear"), call("price", item="plum"),
                call("buy", item="apple"), report("finish", "done")])
    start = time.monotonic()
    r = run_task(task, SlowLedger(), _cfg(deadline_s=1.0), out_dir=tmp_path, models=m)
    assert r.reason.startswith("deadline: ") and "budgets.deadline_s = 1" in r.reason
    assert time.monotonic() - start < 5
    ev = events_of(r.events_path)
    assert ev[-1]["event"] == "task_end" and ev[-1]["reason"] == r.reason
    assert 1 <= sum(e["event"] == "tool_call" for e in ev) < 4
    # Without a deadline the same run completes.
    m = models([delegate("buy", ["buy", "total", "price"]), complete("3")],
               [call("price", item="apple"), call("buy", item="apple"), report("finish", "done")])
    r = run_task(task, SlowLedger(), _cfg(), out_dir=tmp_path / "b", models=m)
    assert r.reason == "completed" and r.success is True


def test_runs_on_the_embedded_model_get_a_default_deadline():
    from porchestra.runaway import LOCAL_DEADLINE_S, effective_deadline

    local = RunConfig(orchestrator_model="local:smollm2", worker_model="local:smollm2")
    assert effective_deadline(local) == LOCAL_DEADLINE_S
    assert effective_deadline(local.model_copy(update={"budgets": Budgets(deadline_s=0)})) is None
    assert effective_deadline(local.model_copy(update={"budgets": Budgets(deadline_s=42)})) == 42
    mixed = RunConfig(orchestrator_model="local:smollm2", worker_model="scripted:w.json")
    assert effective_deadline(mixed) is None and effective_deadline(_cfg()) is None
