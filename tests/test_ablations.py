"""Ablations, one at a time: revision dimensions (the orchestrator's change is ignored and logged)
and protocol fields (stripped from reports before the orchestrator sees them, and from prompts)."""

import json

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, models, report, revise
from policy_helpers import of

from porchestra.run import run_task

REVISE_REPORT = json.dumps({"action": "revise", "memory": "", "params": {
    "state": "STATE-TEXT apple bought",
    "action": {"type": "revise", "task_scope": {"operation": "keep", "object": "", "details": ""},
               "resource": {"operation": "request", "object": "tool", "details": "a tool"},
               "request": "REQUEST-TEXT more", "reason": "because"},
    "evidence": {"summary": "ev", "raw": {"ev": "EVIDENCE-RAW"}}}})
CHANGE = {"task_scope": ("instruction", "buy only a pear"), "context": ("context", "prices are in euros"),
          "tools": ("tools", ["buy", "total", "price"]), "budget": ("step_budget", 5)}
HARNESS_FIELD = {"task_scope": "subgoal", "context": "context", "tools": "tools", "budget": "step_budget"}


def _run(tmp_path, cfg, task, ablate, orch_revision):
    cfg = cfg.model_copy(update={"ablate": ablate})
    work = [call("buy", item="apple"),
            REVISE_REPORT,
            call("buy", item="pear"), call("total"), report("finish", "total 8")]
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10), orch_revision, complete("8")]
    r = run_task(task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    return r, events_of(r.events_path)


@pytest.mark.parametrize("dim", list(CHANGE))
def test_revision_dimension_off(tmp_path, cfg, ledger_task, dim):
    everything = revise(instruction="buy only a pear", context="prices are in euros",
                        tools=["buy", "total", "price"], step_budget=5)
    r, ev = _run(tmp_path, cfg, ledger_task, [dim], everything)
    (rev,) = of(ev, "revise")
    assert rev["ignored"] == [dim]
    before, after = rev["harness_before"], rev["harness"]
    assert after[HARNESS_FIELD[dim]] == before[HARNESS_FIELD[dim]]  # the ablated dimension kept its value
    for other in set(CHANGE) - {dim}:  # the other three still change
        assert after[HARNESS_FIELD[other]] != before[HARNESS_FIELD[other]], other
    system = of(ev, "llm_call", role="orchestrator")[1]["messages"][0]["content"]
    assert f"cannot be revised in this run: {dim}" in system
    revision_text = of(ev, "llm_call", role="worker")[2]["messages"][-1]["content"]
    assert "unavailable in this run" not in revision_text  # the refusal is logged, never shown


@pytest.mark.parametrize("field,marker", [("state", "STATE-TEXT"), ("request", "REQUEST-TEXT"),
                                          ("evidence", "EVIDENCE-RAW")])
def test_protocol_field_off(tmp_path, cfg, ledger_task, field, marker):
    r, ev = _run(tmp_path, cfg, ledger_task, [field], revise(context="go on"))
    rep = of(ev, "report")[0]
    assert {"state": rep["state"], "request": rep["request"], "evidence": rep["evidence"]["raw"]}[field] in ("", {})
    prompt = of(ev, "llm_call", role="orchestrator")[1]["messages"][1]["content"]
    assert marker not in prompt
    for other, m in {"state": "STATE-TEXT", "request": "REQUEST-TEXT", "evidence": "EVIDENCE-RAW"}.items():
        if other != field:
            assert m in prompt, other  # the other two fields still reach the orchestrator
    worker_system = of(ev, "llm_call", role="worker")[0]["messages"][0]["content"]
    line = {"state": "state contains facts", "request": "Put requests in action.request",
            "evidence": "evidence.summary must quote"}[field]
    assert line not in worker_system
    assert r.success is True
