"""The reader rebuilds each agent's trajectory and the decision sequence from the event log."""

from conftest import LedgerEnv, call, complete, delegate, models, report, revise

from porchestra.log.trajectory import load_run
from porchestra.run import run_task


def test_rebuilds_agents_and_decisions(tmp_path, cfg, ledger_task):
    m = models([delegate("buy apple", ["buy"]), revise(tools=["buy", "total"], instruction="apple+pear+total"),
                "not json", delegate("double-check", ["total"]), complete("8")],
               [call("buy", item="apple"), report("revise", "need more", "pear and total", resource="tool"),
                call("buy", item="pear"), call("total"), report("finish", "8"),
                call("total"), report("finish", "8")])
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=m)
    run = load_run(tmp_path)
    assert run.success is True and run.task["id"] == "t1"
    assert [d.action for d in run.decisions] == ["delegate_task", "revise_task", None, "delegate_task", "complete"]
    assert [d.target for d in run.decisions] == ["worker-1", "worker-1", None, "worker-2", None]
    assert run.decisions[1].handoff == {"worker_id": "worker-1", "kind": "report", "report_type": "revise"}
    assert run.decisions[1].effect["event"] == "revise" and run.decisions[3].effect["event"] == "delegate"
    w1 = run.agents["worker-1"]
    assert [s["event"] for s in w1.steps] == ["tool_call", "report", "revise", "tool_call", "tool_call", "report"]
    assert w1.harness["tools"] == ["buy", "total"] and w1.steps[-1]["type"] == "finish"
    # after its finish the worker stayed live (revisable) until the new delegation superseded it
    assert w1.end["event"] == "terminate" and w1.end["reason"] == "superseded by a new delegation"
    assert w1.messages[-1]["role"] == "assistant" and len(w1.llm_calls) == 5
    assert run.agents["worker-2"].harness["subgoal"] == "double-check"
