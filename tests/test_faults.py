"""Fault injection at the tool layer, and recovery/delay computed from the event log."""

import json

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, models, report, revise
from policy_helpers import of
from test_policies import AltLedgerEnv

from porchestra.analysis.episodes import load_run
from porchestra.analysis.recovery import fault_outcome, kaplan_meier, recovery_summary
from porchestra.faults import FaultSpecError, fault_injector, parse_fault_spec
from porchestra.run import run_task

PRICES = {"scripted:orchestrator": [1000, 2000], "scripted:worker": [100, 200]}


def u(text):  # fixed usage so that token and cost delays can be computed by hand
    return {"text": text, "usage": {"input": 100, "output": 10}}


def test_parse_fault_spec():
    got = parse_fault_spec("revoke:buy@first, transient:price:0.5@calls=2,rename:buy:acquire@step=4,"
                           "schema:buy:item->product,revoke:*@step=3-8")
    assert [g["type"] for g in got] == ["revoke", "transient", "rename", "schema", "revoke"]
    assert got[1] == {"id": "f2", "type": "transient", "target": "price", "p": 0.5, "trigger": "calls", "at": 2}
    assert got[2]["new_name"] == "acquire" and got[2]["at"] == 4
    assert (got[3]["param"], got[3]["new_param"], got[3].get("trigger")) == ("item", "product", None)
    assert (got[4]["target"], got[4]["at"], got[4]["at_max"]) == ("*", 3, 8)
    for bad in ("explode:buy", "revoke:buy@soon", "schema:buy:item", "rename:buy", "revoke:buy:x"):
        with pytest.raises(FaultSpecError):
            parse_fault_spec(bad)


def test_revoked_tool_recovery_and_delay_by_hand(tmp_path, cfg, ledger_task):
    """Steps: 1 delegate, 2 buy → revoked (first failure), 3 worker asks for a revision, 4 the
    orchestrator revises (intervention), 5 purchase works (first successful alternative)."""
    cfg = cfg.model_copy(update={"prices": PRICES})
    orch = [u(delegate("buy apple and pear", ["buy", "total"])),
            u(revise(tools=["purchase", "total"], context="buy was revoked; use purchase")), u(complete("8"))]
    work = [u(call("buy", item="apple")),
            u(report("revise", "buy is unavailable", "give me another purchase tool", resource="tool",
                     raw={"error": "revoked"})),
            u(call("purchase", item="apple")), u(call("purchase", item="pear")), u(call("total")),
            u(report("finish", "total 8"))]
    r = run_task(ledger_task, AltLedgerEnv(), cfg, out_dir=tmp_path / "faulted", models=models(orch, work),
                 wrap_runtime=fault_injector("revoke:buy@first"))
    assert r.success is True
    ev = events_of(r.events_path)
    act, hit = of(ev, "fault")
    assert (act["phase"], hit["phase"], hit["target"], hit["trigger"], hit["step"]) == ("activate", "hit", "buy", "first", 2)
    assert "buy" not in [t for t in of(ev, "revise")[0]["harness"]["tools"]]
    o = fault_outcome(load_run(tmp_path / "faulted")[0])
    assert (o.failure_step, o.intervention_step, o.recovery_step) == (2, 4, 5)
    # worker execution steps from the fault to the intervention: step 2 only (the report at 3 is a
    # communication action, the revise at 4 an orchestrator decision); the older global-step delay is 2
    assert (o.intervention_delay, o.intervention_delay_global, o.recovery_delay) == (1, 2, 3)
    assert (o.intervention_tokens, o.recovery_tokens) == (220, 330)  # steps 3-4 and 3-5, 110 tokens each
    assert o.intervention_cost == pytest.approx(0.012 + 0.12) and o.recovery_cost == pytest.approx(0.144)
    assert o.recovered

    clean = run_task(ledger_task, AltLedgerEnv(), cfg, out_dir=tmp_path / "clean", models=models(
        [delegate("buy apple and pear", ["buy", "total"]), complete("8")],
        [call("buy", item="apple"), call("buy", item="pear"), call("total"), report("finish", "8")]))
    assert clean.success is True
    s = recovery_summary(load_run(tmp_path / "faulted"), load_run(tmp_path / "clean"))
    assert (s["hit"], s["eligible"], s["recovered"], s["recovery_rate"]) == (1, 1, 1, 1.0)
    assert s["mean_intervention_delay_steps"] == 1 and s["mean_recovery_delay_steps"] == 3
    assert s["mean_intervention_delay_global_steps"] == 2
    assert recovery_summary(load_run(tmp_path / "faulted"), delay="global_steps")["mean_intervention_delay_steps"] == 2
    assert s["km_curve"] == [[0.0, 0.0], [3.0, 1.0]]


def test_unrecovered_episode_is_censored(tmp_path, cfg, ledger_task):
    cfg = cfg.model_copy(update={"faults": parse_fault_spec("revoke:buy@first")})
    orch = [delegate("buy apple and pear", ["buy", "total"]), complete("0")]
    work = [call("buy", item="apple"), call("buy", item="pear"), call("total"), report("finish", "nothing bought")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    o = fault_outcome(load_run(tmp_path)[0])
    assert r.success is False and not o.recovered and o.intervention_step is None
    assert o.time == o.last_step - o.failure_step == 4  # failure at 2, last step 6 (complete)
    s = recovery_summary(load_run(tmp_path))
    assert s["recovery_rate"] == 0.0 and s["km_curve"] == [[0.0, 0.0], [4.0, 0.0]]


def test_kaplan_meier_with_censoring():
    # recovered at 1, 2, 2; censored at 2 and 5 → S(1)=4/5, S(2)=4/5*(1-2/4)=0.4
    curve = kaplan_meier([1, 2, 2, 2, 5], [True, True, True, False, False])
    assert curve == [(0.0, 1.0), (1.0, 0.8), (2.0, pytest.approx(0.4))]


def test_rename_old_name_fails_new_name_works_after_revision(tmp_path, cfg, ledger_task):
    orch = [delegate("buy apple and pear", ["buy", "total"]),
            revise(tools=["acquire", "total"], context="buy is now called acquire"), complete("8")]
    work = [call("buy", item="apple"), report("revise", "buy does not exist", "tool renamed?", resource="tool"),
            call("acquire", item="apple"), call("acquire", item="pear"), call("total"), report("finish", "8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work),
                 wrap_runtime=fault_injector("rename:buy:acquire@first"))
    ev = events_of(r.events_path)
    assert [(e["tool"], e["ok"]) for e in of(ev, "tool_call")] == [
        ("buy", False), ("acquire", True), ("acquire", True), ("total", True)]
    assert "does not exist" in of(ev, "tool_call")[0]["error"] and r.success is True
    assert [(e["fault_id"], e["phase"]) for e in of(ev, "fault")] == [("f1", "activate"), ("f1", "hit")]
    assert "acquire" in of(ev, "llm_call", role="orchestrator")[1]["messages"][0]["content"]


def test_schema_change_old_argument_fails_new_one_works(tmp_path, cfg, ledger_task):
    work = [call("buy", item="apple"), call("buy", product="apple"), call("buy", product="pear"), call("total"),
            report("finish", "8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path,
                 models=models([delegate("buy", ["buy", "total"]), complete("8")], work),
                 wrap_runtime=fault_injector("schema:buy:item->product"))
    ev = events_of(r.events_path)
    assert [e["ok"] for e in of(ev, "tool_call")] == [False, True, True, True] and r.success is True
    assert "expected 'product'" in of(ev, "tool_call")[0]["error"]
    orch_prompt = of(ev, "llm_call", role="orchestrator")[-1]["messages"][0]["content"]
    assert '"product"' in orch_prompt  # the changed schema is what agents now see


def test_transient_faults_are_seeded(tmp_path, cfg, ledger_task):
    def once(d, seed):
        c = cfg.model_copy(update={"seed": seed, "faults": parse_fault_spec("transient:price:0.5")})
        work = [call("price", item="plum")] * 12 + [report("finish", "x")]
        r = run_task(ledger_task, LedgerEnv(), c, out_dir=tmp_path / d,
                     models=models([delegate("p", ["price"]), complete("0")], work))
        return [e["ok"] for e in of(events_of(r.events_path), "tool_call")]

    a, b, c = once("a", 1), once("b", 1), once("c", 2)
    assert a == b and True in a and False in a and a != c


def test_step_trigger_with_random_target(tmp_path, cfg, ledger_task):
    c = cfg.model_copy(update={"seed": 3, "faults": parse_fault_spec("revoke:*@step=2-4")})
    work = [call("price", item="plum")] * 5 + [report("finish", "x")]
    r = run_task(ledger_task, LedgerEnv(), c, out_dir=tmp_path,
                 models=models([delegate("p", ["price", "buy", "total"]), complete("0")], work))
    (act,) = of(events_of(r.events_path), "fault", phase="activate")
    assert act["target"] in ("price", "buy", "total") and 2 <= act["at"] <= 4 and act["step"] >= act["at"]
    assert json.dumps(act["trigger"]).startswith('"step=')
