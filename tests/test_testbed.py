"""The miniature testbed (porchestra/envs/testbed): generation and splits, the scripted checker on
gold and on wrong answers, and the scripted expert's gold trajectories through the real loop."""

from __future__ import annotations

import json

import pytest

from porchestra.config import RunConfig
from porchestra.envs.benchmark import BenchmarkError
from porchestra.envs.testbed import (DYNAMICS, TestbedBenchmark, TestbedEnv, expected, expert_replies,
                                     make_task)
from porchestra.envs.testbed.world import TEMPLATES
from porchestra.models.scripted import ScriptedModel
from porchestra.eval.gold import run_gold
from porchestra.protocol import EndTask, ToolCall
from porchestra.run import Models, run_task

CFG = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_tasks_are_deterministic_and_splits_differ_in_seeds_and_wording():
    a, b = make_task("train", 7), make_task("train", 7)
    assert a == b and make_task("train", 8) != a
    train = {make_task("train", s).metadata["template"] for s in range(60)}
    held = [make_task("heldout", s) for s in range(60)]
    assert train == set(range(len(TEMPLATES["train"])))
    # Held-out wording comes only from its own templates, never a training one.
    for t in held:
        assert not any(t.instruction.startswith(tpl.split("{")[0]) for tpl in TEMPLATES["train"])
    assert {t.metadata["dynamics"] for t in held} == set(DYNAMICS)
    with pytest.raises(ValueError, match="split"):
        make_task("test", 0)
    with pytest.raises(BenchmarkError, match="split"):
        TestbedBenchmark().load_tasks({"split": "dev"})
    loaded = TestbedBenchmark().load_tasks({"split": "heldout", "limit": 5, "dynamics": "revoke"})
    assert len(loaded) == 5 and {t.category for t in loaded} == {"revoke"}
    assert TestbedBenchmark().load_tasks({"ids": ["testbed-train-3"]})[0] == make_task("train", 3)


def _replay(env: TestbedEnv, calls: list[ToolCall], end: EndTask | None):
    results = [env.execute(c, "worker-1") for c in calls]
    return results, env.evaluate(end)


@pytest.mark.parametrize("dyn", DYNAMICS)
def test_checker_accepts_gold_and_rejects_wrong_answers(dyn):
    task = make_task("heldout", 11, dyn)
    env = TestbedEnv()
    env.reset(task)
    calls, end = env.gold()
    results, score = _replay(env, calls, end)
    assert all(r.ok for r in results), [r.error for r in results]
    assert score.success is True and score.reason == "ok"
    items, total = expected(task)
    # Wrong total, right cart.
    env.reset(task)
    _, score = _replay(env, calls, EndTask(action="complete", answer=str(total + 1)))
    assert score.success is False and score.details["answer"] is False
    # Right number, but the code was never applied.
    env.reset(task)
    _, score = _replay(env, [c for c in calls if c.tool != "apply_code"], end)
    assert score.success is False and score.details["code"] is False
    # No answer at all.
    env.reset(task)
    _, score = _replay(env, calls, None)
    assert score.success is False and score.reason == "no answer"


def test_revoked_tool_and_scope_change_are_real_mismatches():
    task = make_task("train", 0, "revoke")
    env = TestbedEnv()
    env.reset(task)
    first, second = task.metadata["order"][:2]
    early = env.execute(ToolCall(tool="add_item_v2", args={"item": first}), "w")
    assert not early.ok and "not open yet" in early.error
    assert env.execute(ToolCall(tool="add_item", args={"item": first}), "w").ok
    r = env.execute(ToolCall(tool="add_item", args={"item": second}), "w")
    assert not r.ok and "add_item_v2" in r.error
    assert env.execute(ToolCall(tool="add_item_v2", args={"item": second}), "w").ok
    task = make_task("train", 0, "scope")
    env.reset(task)
    env.execute(ToolCall(tool="add_item", args={"item": task.metadata["order"][0]}), "w")
    (note,) = env.notifications()
    assert task.metadata["extra"] in note and env.notifications() == []
    # Ignoring the update fails the check even with the old order's correct total.
    for item in task.metadata["order"][1:]:
        env.execute(ToolCall(tool="add_item", args={"item": item}), "w")
    env.execute(ToolCall(tool="apply_code", args={"code": task.metadata["code"]}), "w")
    old_total = env.execute(ToolCall(tool="cart_total", args={}), "w").output
    score = env.evaluate(EndTask(action="complete", answer=old_total))
    assert score.success is False and score.details["cart"] is False


@pytest.mark.parametrize("dyn", DYNAMICS)
def test_gold_policy_passes_the_checker(tmp_path, dyn):
    task = make_task("train", 4, dyn)
    score, _ = run_gold(task, TestbedEnv(), tmp_path)
    assert score.success is True, score


@pytest.mark.parametrize("dyn", DYNAMICS)
def test_expert_trajectory_solves_the_task_through_the_loop(tmp_path, dyn):
    task = make_task("heldout", 21, dyn)
    orch, work = expert_replies(task)
    models = Models(ScriptedModel(orch, name="scripted:expert-o"), {"default": ScriptedModel(work, name="scripted:expert-w")})
    r = run_task(task, TestbedEnv(), CFG, out_dir=tmp_path, models=models)
    assert r.success is True, (r.reason, r.answer)
    ev = _events(r.events_path)
    kinds = [e["event"] for e in ev]
    if dyn == "revoke":  # the worker asked, the orchestrator revised its tools, the same worker went on
        (rep,) = [e for e in ev if e["event"] == "report" and e["type"] == "revise"]
        assert rep["resource"]["object"] == "tool" and rep["resource"]["details"] == "add_item_v2"
        (rev,) = [e for e in ev if e["event"] == "revise"]
        assert "add_item_v2" in rev["harness"]["tools"] and kinds.count("delegate") == 1
    if dyn == "scope":
        assert any(e["event"] == "notification" for e in ev)
    assert not [e for e in ev if e["event"] == "format_error"]


def test_eval_option_flags_given_with_O_are_not_erased_by_unset_alias_flags(tmp_path):
    """`-O limit=2 -O start=3` selects two tasks from seed 3; an alias flag left unset (--limit)
    used to overwrite the -O value with None, so all 30 default tasks ran."""
    from porchestra.cli import main

    with pytest.raises(SystemExit) as e:
        main(["eval", "testbed", "-O", "limit=2", "-O", "start=3", "--policy", "gold", "--out", str(tmp_path / "e"),
              "-q"])
    assert e.value.code == 0
    rows = [json.loads(x) for x in (tmp_path / "e" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in rows) == ["testbed-heldout-3", "testbed-heldout-4"]
