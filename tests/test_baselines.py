"""The paper's baselines, control flow with scripted models: who is called when, what each sees.
(MAS2, Skill-MAS, AutoAgents, Mini-SWE; Orchestra-o1 candidates on SWE-bench: test_swe_candidates.)"""

import json

from conftest import LedgerEnv, complete, events_of, models, report
from conftest import call as jcall
from policy_helpers import delegate_batch, of, orch_calls

from porchestra.models.scripted import ScriptedModel
from porchestra.policies.mas2 import Mas2Policy
from porchestra.policies.mini_swe import MiniSwePolicy, final_answer
from porchestra.policies.offline import AutoAgentsPolicy, SkillMasPolicy
from porchestra.run import Models, run_task

PLAN = delegate_batch(("node one: buy an apple", ["buy"]), ("node two: buy a pear and total", ["buy", "total"]))


def test_mas2_generator_then_nodes_rectifier_only_on_a_predefined_condition(tmp_path, cfg, ledger_task):
    rectify = json.dumps({"action": "revise_task", "reasoning": "wrong item", "params": {
        "task_scope": {"operation": "keep", "object": "", "details": ""},
        "resource": {"operation": "keep", "object": "none", "details": ""},
        "context": "RECTIFIED: the item is called pear"}})
    orch = [PLAN, rectify, complete("8")]
    work = [jcall("buy", item="apple"), report("finish", "bought apple"),
            jcall("buy", item="pearr"),  # a failed tool call: execution failure → Rectifier
            jcall("buy", item="pear"), jcall("total"), report("finish", "total 8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work), policy=Mas2Policy())
    ev = events_of(r.events_path)
    assert r.success is True
    calls = orch_calls(ev)
    assert [c.get("template") for c in calls[:2]] == ["mas2_generator.j2", "mas2_rectifier.j2"]
    assert len(calls) == 3  # generator, rectifier, synthesis: nothing at node 1's normal finish
    (imp,) = of(ev, "implement")
    assert imp["assignments"] == ["default", "default"] and imp["llm_call"] is False  # one model: no call
    (rec,) = of(ev, "rectify")
    assert rec["condition"].startswith("execution failure") and rec["worker"] == "worker-2"
    assert "no such item: pearr" in calls[1]["messages"][0]["content"] or "pearr" in json.dumps(calls[1]["messages"])
    d1, d2 = of(ev, "delegate")
    assert "bought apple" in d2["harness"]["context"]  # results flow to the next node
    w2 = of(ev, "llm_call", agent_id="worker-2")
    assert "RECTIFIED" in w2[1]["messages"][-1]["content"]  # the same node resumed with the fix
    assert '"finish|stop"' in w2[0]["messages"][0]["content"]  # workers cannot ask for revisions


def test_mas2_implementer_assigns_backbones_from_the_worker_models(tmp_path, cfg, ledger_task):
    cfg = cfg.model_copy(update={"worker_models": {"big": "scripted:big.json"}})
    assign = json.dumps({"action": "delegate_tasks", "reasoning": "hard node on big", "params": {"tasks": [
        {"task_instruction": "node one: buy an apple", "context": "", "tools": ["buy"], "model": "default"},
        {"task_instruction": "node two: buy a pear and total", "context": "", "tools": ["buy", "total"],
         "model": "big"}]}})
    small = ScriptedModel([jcall("buy", item="apple"), report("finish", "apple")], name="scripted:small")
    big = ScriptedModel([jcall("buy", item="pear"), jcall("total"), report("finish", "8")], name="scripted:big")
    orch = ScriptedModel([PLAN, assign, complete("8")], name="scripted:orchestrator")
    ms = Models(orch, {"default": small, "big": big})
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=ms, policy=Mas2Policy())
    ev = events_of(r.events_path)
    assert r.success is True
    assert [c.get("template") for c in orch_calls(ev)[:2]] == ["mas2_generator.j2", "mas2_implementer.j2"]
    assert of(ev, "implement")[0]["assignments"] == ["default", "big"]
    assert [d["model_name"] for d in of(ev, "delegate")] == ["scripted:small", "scripted:big"]


def test_mas2_resource_limit_fires_the_rectifier_which_adds_budget(tmp_path, cfg, ledger_task):
    plan = json.dumps({"action": "delegate_tasks", "reasoning": "one node", "params": {"tasks": [
        {"task_instruction": "buy apple and pear, total", "context": "", "tools": ["buy", "total"], "step_budget": 2}]}})
    more = json.dumps({"action": "revise_task", "reasoning": "needs steps", "params": {
        "task_scope": {"operation": "keep", "object": "", "details": ""},
        "resource": {"operation": "request", "object": "budget", "details": ""}, "step_budget": 3}})
    work = [jcall("buy", item="apple"), jcall("buy", item="pear"), jcall("total"), report("finish", "8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models([plan, more, complete("8")], work),
                 policy=Mas2Policy())
    ev = events_of(r.events_path)
    assert of(ev, "rectify")[0]["condition"].startswith("resource limit") and r.success is True
    assert of(ev, "revise")[0]["harness"]["step_budget"] == 5


def test_skill_mas_generates_team_and_workflow_from_the_meta_skill(tmp_path, cfg, ledger_task):
    work = [jcall("buy", item="apple"), report("finish", "bought apple"),
            jcall("buy", item="pear"), jcall("total"), report("finish", "total 8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models([PLAN, complete("8")], work),
                 policy=SkillMasPolicy())
    ev = events_of(r.events_path)
    calls = orch_calls(ev)
    assert r.success is True and len(calls) == 2 and calls[0]["template"] == "skill_mas_plan.j2"
    prompt = calls[0]["messages"][0]["content"]
    for part in ("Task decomposition", "Agent engineering", "Workflow orchestration"):
        assert part in prompt
    assert of(ev, "plan")[0]["mode"] == "skill-mas" and not of(ev, "revise")


def test_autoagents_drafting_stage_planner_then_observer_then_fixed_roles(tmp_path, cfg, ledger_task):
    draft = delegate_batch(("DRAFT-ROLE buyer: buy everything", ["buy", "total"]))
    work = [jcall("buy", item="apple"), report("finish", "bought apple"),
            jcall("buy", item="pear"), jcall("total"), report("finish", "total 8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models([draft, PLAN, complete("8")], work),
                 policy=AutoAgentsPolicy())
    ev = events_of(r.events_path)
    calls = orch_calls(ev)
    assert [c.get("template") for c in calls[:2]] == ["autoagents_planner.j2", "autoagents_observer.j2"]
    assert "DRAFT-ROLE buyer" in calls[1]["messages"][0]["content"]  # the Observer reviews the draft
    assert of(ev, "draft")[0]["stage"] == "planner"
    assert [d["harness"]["subgoal"] for d in of(ev, "delegate")] == ["node one: buy an apple",
                                                                    "node two: buy a pear and total"]
    assert r.success is True


def block(thought: str, command: str) -> str:
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


def test_mini_swe_own_prompt_one_command_per_turn_linear_history(tmp_path, cfg, ledger_task):
    work = [block("buy the apple", 'buy {"item": "apple"}'), block("now the pear", 'buy {"item": "pear"}'),
            block("sum", "total"), block("done", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models([], work), policy=MiniSwePolicy())
    ev = events_of(r.events_path)
    assert r.success is True and r.answer == "8" and orch_calls(ev) == []
    assert [(e["tool"], e["args"]) for e in of(ev, "tool_call")] == [
        ("buy", {"item": "apple"}), ("buy", {"item": "pear"}), ("total", {})]
    calls = of(ev, "llm_call", role="worker")
    system = calls[0]["messages"][0]["content"]
    assert "THOUGHT" in system and "MainAgent" not in system and "SubAgent" not in system
    assert "evidence" not in system  # no structured communication protocol
    for a, b in zip(calls, calls[1:]):  # one linear history: each call extends the previous one
        assert b["messages"][: len(a["messages"])] == a["messages"]


def test_mini_swe_format_errors_and_answers():
    from porchestra.parsing import FormatError
    from porchestra.policies.mini_swe import parse_mini_swe

    assert parse_mini_swe(["bash"], block("look", "ls -la && cat x")).args == {"command": "ls -la && cat x"}
    assert final_answer("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo 'Paris'") == "Paris"
    for bad in ("no block at all", block("a", "x") + block("b", "y"), block("t", 'nosuch {"a": 1}'),
                block("t", "buy [1]")):
        try:
            parse_mini_swe(["buy"], bad)
        except FormatError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_mas2_rectifier_can_replace_the_rest_of_the_workflow(tmp_path, cfg, ledger_task):
    replan = delegate_batch(("NEW node: buy a pear and total", ["buy", "total"]))
    work = [jcall("buy", item="apple"), report("stop", "wrong tools for this node"),
            jcall("buy", item="pear"), jcall("total"), report("finish", "total 8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path,
                 models=models([PLAN, replan, complete("8")], work), policy=Mas2Policy())
    ev = events_of(r.events_path)
    assert of(ev, "rectify")[0]["decision"] == "delegate_tasks"
    assert [d["harness"]["subgoal"] for d in of(ev, "delegate")] == ["node one: buy an apple",
                                                                    "NEW node: buy a pear and total"]
    assert r.success is True
