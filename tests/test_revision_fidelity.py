"""Revisions as the paper means them (B.2, Fig. 6): an ablated dimension never reaches the worker in
any form, the orchestrator's private reasoning is off by default, a constraints revision is shown to
the resuming worker, and remove / decompose / state_handoff have runtime meaning."""

import json

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, models, report
from policy_helpers import of

from porchestra.run import run_task
from porchestra.schemas import orchestrator_schema

REVISE_REPORT = report("revise", state="STATE-TEXT apple bought", request="REQ", resource="tool",
                       raw={"ev": "EVIDENCE-RAW"})
SCOPE = {"operation": "keep", "object": "", "details": ""}
RESOURCE = {"operation": "keep", "object": "none", "details": ""}


def revision(dim: str) -> tuple[dict, list[str]]:
    """A revision that changes `dim` only, and markers that exist only in what it changes."""
    p = {"task_scope": dict(SCOPE), "resource": dict(RESOURCE)}
    if dim == "task_scope":
        p["task_scope"] = {"operation": "reduce", "object": "OBJ-SCOPE", "details": "DETAILS-SCOPE"}
        p["instruction"] = "INSTR-MARK buy only a pear"
        return p, ["OBJ-SCOPE", "DETAILS-SCOPE", "INSTR-MARK", "Task scope: reduce"]
    if dim == "context":
        p["resource"] = {"operation": "request", "object": "context", "details": "RES-CONTEXT"}
        p["context"] = "CTX-MARK prices are in euros"
        return p, ["RES-CONTEXT", "CTX-MARK"]
    if dim == "tools":
        p["resource"] = {"operation": "request", "object": "tool", "details": "RES-TOOL"}
        p["tools"] = ["buy", "total", "price"]
        return p, ["RES-TOOL", "Price of an item", "New tools"]
    if dim == "budget":
        p["resource"] = {"operation": "request", "object": "budget", "details": "RES-BUDGET"}
        p["step_budget"] = 7
        return p, ["RES-BUDGET", "+7"]
    assert dim == "constraints"
    p["resource"] = {"operation": "request", "object": "constraint", "details": "RES-CONSTRAINT"}
    p["constraints"] = ["CONSTRAINT-MARK never buy plums"]
    return p, ["RES-CONSTRAINT", "CONSTRAINT-MARK", "Constraints now"]


def _run(tmp_path, cfg, task, params, reasoning="REASONING-MARK", **cfg_update):
    cfg = cfg.model_copy(update=cfg_update)
    work = [call("buy", item="apple"), REVISE_REPORT, call("buy", item="pear"), call("total"),
            report("finish", "total 8")]
    rev = json.dumps({"action": "revise_task", "reasoning": reasoning, "params": params})
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10), rev, complete("8")]
    r = run_task(task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    ev = events_of(r.events_path)
    worker_calls = of(ev, "llm_call", role="worker")
    seen = "\n".join(m["content"] for m in worker_calls[-1]["messages"])  # the worker's whole history
    return r, ev, seen, worker_calls[2]["messages"][-1]["content"]


DIMS = ["task_scope", "context", "tools", "budget", "constraints"]


@pytest.mark.parametrize("dim", DIMS)
def test_dimension_reaches_the_worker_without_ablation(tmp_path, cfg, ledger_task, dim):
    params, markers = revision(dim)
    r, ev, seen, revision_text = _run(tmp_path, cfg, ledger_task, params)
    for m in markers:
        assert m in revision_text, m
    assert of(ev, "revise")[0]["ignored"] == []


@pytest.mark.parametrize("dim", DIMS)
def test_ablated_dimension_never_reaches_the_worker(tmp_path, cfg, ledger_task, dim):
    params, markers = revision(dim)
    r, ev, seen, revision_text = _run(tmp_path, cfg, ledger_task, params, ablate=[dim],
                                      revision_reasoning=True)
    for m in markers + ["REASONING-MARK"]:
        assert m not in seen, m  # in no message the worker ever received
    assert "unavailable" not in revision_text and "Not changed" not in revision_text  # nor a refusal
    (rev,) = of(ev, "revise")
    assert dim in rev["ignored"]  # ... which the log keeps
    assert r.success is True


def test_reasoning_is_private_unless_the_option_is_set(tmp_path, cfg, ledger_task):
    params, _ = revision("context")
    *_, text = _run(tmp_path, cfg, ledger_task, params)
    assert "REASONING-MARK" not in text
    *_, text = _run(tmp_path / "on", cfg, ledger_task, params, revision_reasoning=True)
    assert "MainAgent's reasoning: REASONING-MARK" in text


def test_constraints_revision_is_rendered_to_the_resuming_worker(tmp_path, cfg, ledger_task):
    params, _ = revision("constraints")
    r, ev, seen, text = _run(tmp_path, cfg, ledger_task, params)
    assert "Constraints now:\n- CONSTRAINT-MARK never buy plums" in text
    assert of(ev, "revise")[0]["harness"]["constraints"] == ["CONSTRAINT-MARK never buy plums"]


def test_remove_ends_the_workers_path(tmp_path, cfg, ledger_task):
    params = {"task_scope": {"operation": "remove", "object": "apple", "details": "not needed"},
              "resource": dict(RESOURCE)}
    work = [call("buy", item="apple"), REVISE_REPORT, call("buy", item="pear"), call("total"),
            report("finish", "total 8")]
    orch = [delegate("buy apple", ["buy", "total"], budget=10),
            json.dumps({"action": "revise_task", "reasoning": "r", "params": params}),
            delegate("buy pear then total", ["buy", "total"], budget=10), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    ev = events_of(r.events_path)
    (t,) = of(ev, "terminate", agent_id="worker-1")
    assert t["by"] == "orchestrator" and "task scope removed" in t["reason"]
    assert not of(ev, "tool_call", agent_id="worker-1", tool="total")  # worker-1 never ran again
    assert of(ev, "delegate", agent_id="worker-2")


def test_decompose_request_answered_with_subtasks_records_lineage(tmp_path, cfg, ledger_task):
    decompose = report("revise", state="two items", request="split per item", scope="decompose")
    work = [call("buy", item="apple"), decompose, call("buy", item="pear"), report("finish", "pear bought"),
            call("total"), report("finish", "total 8")]
    batch = json.dumps({"action": "delegate_tasks", "reasoning": "split", "params": {"tasks": [
        {"task_instruction": "pear only", "context": "", "tools": ["buy"]},
        {"task_instruction": "total only", "context": "", "tools": ["total"]}]}})
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10), batch, complete("8"), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    ev = events_of(r.events_path)
    children = [e for e in of(ev, "delegate") if e.get("parent") == "worker-1"]
    assert [c["agent_id"] for c in children] == ["worker-2", "worker-3"]
    assert all(c["lineage"] == "decompose" for c in children)
    assert of(ev, "terminate", agent_id="worker-1")[0]["reason"].startswith("decomposed into 2")
    offered = of(ev, "llm_call", role="orchestrator")[1]["messages"][0]["content"]
    assert '"action": "delegate_tasks"' in offered


@pytest.mark.parametrize("ablate", [[], ["task_scope"]])
def test_revise_task_decompose_makes_the_next_delegation_the_rest(tmp_path, cfg, ledger_task, ablate):
    """An orchestrator-initiated decompose: the revised worker keeps one part (the narrowed instruction)
    and goes on; the next delegation is the rest, recorded as its decomposition (parent + lineage)."""
    params = {"task_scope": {"operation": "decompose", "object": "items", "details": "one item per worker"},
              "resource": dict(RESOURCE), "instruction": "apple only"}
    work = [call("buy", item="apple"), REVISE_REPORT, report("finish", "apple bought"),
            call("buy", item="pear"), call("total"), report("finish", "total 8")]
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10),
            json.dumps({"action": "revise_task", "reasoning": "split", "params": params}),
            delegate("buy pear, then total", ["buy", "total"], budget=10), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg.model_copy(update={"ablate": ablate}), out_dir=tmp_path,
                 models=models(orch, work))
    ev = events_of(r.events_path)
    (rev,) = of(ev, "revise")
    assert rev["harness"]["subgoal"] == ("buy apple and pear" if ablate else "apple only")
    (child,) = of(ev, "delegate", agent_id="worker-2")
    if ablate:  # the decompose was refused: no lineage, as if it had not been asked
        assert child.get("lineage") is None and rev["ignored"] == ["task_scope"]
    else:
        assert child["parent"] == "worker-1" and child["lineage"] == "decompose"
        # worker-1 resumed after the revision (its finish report), paused on it, then closed by the rest
        assert of(ev, "terminate", agent_id="worker-1")[0]["reason"] == "decomposed into 1 sub-task(s)"
    assert r.success is True


def test_state_handoff_travels_with_an_executor_replacement(tmp_path, cfg, ledger_task):
    params = {"executor": {"operation": "replace"}, "task_scope": dict(SCOPE), "resource": dict(RESOURCE)}
    work = [call("buy", item="apple"), REVISE_REPORT, call("buy", item="pear"), call("total"),
            report("finish", "total 8")]
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10),
            json.dumps({"action": "revise_task", "reasoning": "fresh context", "params": params}), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    ev = events_of(r.events_path)
    new = of(ev, "delegate", agent_id="worker-2")[0]
    assert new["replaces"] == "worker-1" and new["lineage"] == "replace"
    first_prompt = of(ev, "llm_call", agent_id="worker-2")[0]["messages"][1]["content"]
    assert "State handed off from worker-1" in first_prompt
    assert "STATE-TEXT apple bought" in first_prompt and "EVIDENCE-RAW" in first_prompt


def test_state_handoff_request_travels_with_a_redelegation(tmp_path, cfg, ledger_task):
    stop = report("stop", state="STATE-TEXT dead end", request="hand my state on", resource="state_handoff",
                  raw={"k": "EVIDENCE-RAW"})
    work = [call("buy", item="apple"), stop, call("buy", item="pear"), call("total"), report("finish", "8")]
    orch = [delegate("buy apple and pear", ["buy", "total"], budget=10),
            delegate("continue: pear and total", ["buy", "total"], budget=10), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work))
    ev = events_of(r.events_path)
    assert of(ev, "delegate", agent_id="worker-2")[0]["parent"] == "worker-1"
    prompt = of(ev, "llm_call", agent_id="worker-2")[0]["messages"][1]["content"]
    assert "STATE-TEXT dead end" in prompt and "EVIDENCE-RAW" in prompt


def test_revise_schema_offers_every_field_the_runtime_accepts():
    s = orchestrator_schema(["revise_task", "terminate"], ["buy"], ["default", "big"], "complete",
                            worker_ids=["worker-1", "worker-2"])
    rev = next(o for o in s["anyOf"] if o["properties"]["action"].get("const") == "revise_task")
    props = rev["properties"]["params"]["properties"]
    assert {"constraints", "executor", "worker_id", "instruction", "context", "tools", "step_budget"} <= set(props)
    assert props["worker_id"]["enum"] == ["worker-1", "worker-2"]
    assert props["executor"]["properties"]["model"]["enum"] == ["default", "big"]
    term = next(o for o in s["anyOf"] if o["properties"]["action"].get("const") == "terminate")
    assert "worker_id" in term["properties"]["params"]["properties"]
    assert "worker_id" not in next(
        o for o in orchestrator_schema(["revise_task"], ["buy"], ["default"], "complete")["anyOf"]
    )["properties"]["params"]["properties"]
