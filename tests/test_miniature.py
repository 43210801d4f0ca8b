"""The miniature's recipe, runner and tables (docs/miniature.md). The runner is exercised on its
cheap real steps (expert runs, exports); the trained steps run in the miniature itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from porchestra.miniature.recipe import Scale, mechanism_ids, steps
from porchestra.miniature.runner import MiniatureError, run
from porchestra.miniature.table import arms_table, cell, mechanism_table, report, wilson


def test_plan_is_a_graph_of_known_steps_with_distinct_outputs(tmp_path):
    plan = steps(tmp_path, Scale())
    names = [s.name for s in plan]
    assert len(set(names)) == len(names)
    assert len({s.done for s in plan}) == len(plan)
    seen: set[str] = set()
    for s in plan:
        assert set(s.after) <= seen, f"{s.name} runs before what it needs"
        seen.add(s.name)
    arm_evals = {s.name: s for s in plan if s.name.startswith("eval-")}
    assert set(arm_evals) == {"eval-sft", "eval-rwr", "eval-opod", "eval-opd-only"}
    for s in arm_evals.values():  # every arm keeps the SFT worker; only the orchestrator changes
        i = s.args.index("--worker-model")
        assert s.args[i + 1] == f"local:{tmp_path / 'sft' / 'final'}"
    opod = next(s for s in plan if s.name == "opod")
    assert opod.args[opod.args.index("--model") + 1] == str(tmp_path / "sft" / "final")  # same SFT start
    assert opod.args[opod.args.index("--lam") + 1] == "1"


def test_mechanism_tasks_are_heldout_and_dynamic():
    from porchestra.envs.testbed.world import make_task

    ids = mechanism_ids(Scale(mechanism_tasks=10))
    assert len(ids) == 10
    for i in ids:
        split, seed = i.split("-")[1], int(i.split("-")[2])
        assert split == "heldout" and make_task(split, seed).metadata["dynamics"] in ("revoke", "scope")


def test_scale_refuses_unknown_fields_and_arms():
    with pytest.raises(ValueError, match="heldout_taks"):
        Scale.model_validate({"heldout_taks": 5})
    with pytest.raises(ValueError, match="arms"):
        Scale(arms=["opod"])


def test_cli_names_a_bad_setting_and_writes_nothing(tmp_path):
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "porchestra.miniature", "--out", str(out), "--set", "heldout_tasks=0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "heldout_tasks" in r.stderr
    assert not out.exists()


def test_runner_runs_cheap_steps_once_and_resumes(tmp_path):
    out = tmp_path / "m"
    scale = Scale(expert_tasks=3)
    ran = run(out, scale, {"sft-data", "sft-data-worker"}, say=lambda _: None)
    assert sorted(ran) == ["expert", "sft-data", "sft-data-worker"]
    rows = [json.loads(x) for x in (out / "sft-worker.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["metadata"]["all_turns"] for r in rows)
    assert (out / "logs" / "expert.log").read_text().startswith("$ porchestra.envs.testbed")
    assert run(out, scale, {"sft-data", "sft-data-worker"}, say=lambda _: None) == []  # all done: nothing reruns
    with pytest.raises(MiniatureError, match="unknown step"):
        run(out, scale, {"sft-dta"}, say=lambda _: None)


def test_wilson_interval_and_cells():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0
    rows = [{"task_id": f"t{i}", "success": i < 3} for i in range(10)] + [{"task_id": "x", "success": None}]
    assert cell(rows) == "3/10 = 30% (11%–60%)"  # the infra row is not scored
    assert cell([]) == "–"


def _results(d: Path, outcomes: dict[str, tuple[str, bool | None]]) -> None:
    d.mkdir(parents=True)
    with (d / "results.jsonl").open("w") as f:
        for tid, (cat, ok) in outcomes.items():
            f.write(json.dumps({"task_id": tid, "trial": 0, "category": cat, "success": ok, "steps": 9,
                                "tokens": {"input": 1000, "output": 100}}) + "\n")


def test_tables_count_rows_per_arm_and_category(tmp_path):
    _results(tmp_path / "eval" / "sft", {"a": ("none", True), "b": ("revoke", False), "c": ("scope", None)})
    _results(tmp_path / "eval" / "opod", {"a": ("none", True), "b": ("revoke", True), "c": ("scope", False)})
    _results(tmp_path / "eval" / "mech-polling", {"b": ("revoke", False), "c": ("scope", False)})
    (tmp_path / "mechanism-ids.txt").write_text("b\nc\n")
    t = arms_table(tmp_path, ["sft", "opod", "rwr"])
    sft, opod, rwr = t.splitlines()[2:5]
    assert "1/2 = 50%" in sft and "| 1 |" in sft  # one infra row, apart
    assert "2/3 = 67%" in opod and rwr.count("–") >= 4  # an arm not run yet shows no numbers
    m = mechanism_table(tmp_path, ["polling"])
    assert "| proactive | 1/2 = 50%" in m and "| polling | 0/2 = 0%" in m
    text = report(tmp_path, ["sft", "opod"], ["polling"], tmp_path / "fig")
    assert (tmp_path / "miniature.md").read_text() == text
    assert (tmp_path / "fig" / "miniature-success.png").stat().st_size > 1000


def test_hintcheck_reads_decisions_and_the_table_reports_it(tmp_path):
    from porchestra.miniature.hintcheck import _decision
    from porchestra.miniature.table import attribution_table

    d = _decision('{"action": "delegate_task", "params": {"tools": ["add_item_v2", "apply_code"]}}')
    assert d == {"action": "delegate_task", "tools": ["add_item_v2", "apply_code"]}
    assert _decision("no json here") == {"action": None, "tools": []}
    row = {"plain": {"action": "revise_task", "tools": []}, "hinted": {"action": None, "tools": []}}
    (tmp_path / "hintcheck.json").write_text(json.dumps({"flagged": 1, "decision_changed": 1,
                                                         "hinted_tool_newly_granted": 0, "now_revises": 0,
                                                         "rows": [row]}))
    text = attribution_table(tmp_path)
    assert "on the 1 rule-flagged decisions" in text and "no parseable action in 1" in text


def test_behaviour_table_reads_what_the_orchestrator_did_from_the_logs(tmp_path):
    from porchestra.config import RunConfig
    from porchestra.envs.testbed import TestbedEnv, expert_replies
    from porchestra.envs.testbed.world import make_task
    from porchestra.miniature.table import behaviour_table
    from porchestra.models.scripted import ScriptedModel
    from porchestra.run import Models, run_task

    d = tmp_path / "eval" / "sft"
    rows = []
    for seed, end_early in ((1, False), (4, True)):  # two revoke tasks: one revised, one ended at the request
        task = make_task("train", seed)
        orch, work = expert_replies(task)
        if end_early:
            orch = [orch[0], json.dumps({"action": "complete", "reasoning": "", "params": {"answer": "1"}})]
        out = d / "tasks" / task.id
        run_task(task, TestbedEnv(), RunConfig(), out_dir=out, run_id=task.id,
                 models=Models(ScriptedModel(orch), {"default": ScriptedModel(work)}))
        rows.append({"task_id": task.id, "category": "revoke", "success": not end_early,
                     "events": f"tasks/{task.id}/events.jsonl"})
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = behaviour_table(tmp_path, ["sft"]).splitlines()[2]
    assert line == "| SFT | 2 | 0 | 2 | 1 | 1 |"
