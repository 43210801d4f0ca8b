"""BFCL miss_func through the full proactive loop with scripted models: the withheld `sort` is asked
for with a `revise` report, arrives at a later turn (notification), and the paused worker is revised
to use it. BFCL's own checker scores the run."""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval")

from conftest import call, complete, delegate, events_of, models, report, revise  # noqa: E402

from porchestra.config import RunConfig  # noqa: E402
from porchestra.envs.bfcl import BFCLBenchmark  # noqa: E402
from porchestra.run import run_task  # noqa: E402

CFG = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")


def script(sort_after_revision: bool = True):
    orch = [
        delegate("Move final_report.pdf from document into a new temp directory", ["cd", "mkdir", "mv"]),
        complete("moved"),
        delegate("grep final_report.pdf in temp for 'budget analysis'", ["cd", "grep"]),
        complete("found"),
        delegate("Sort final_report.pdf by line", ["cd"]),
        complete("sort is not available yet"),
        revise(task_scope={"operation": "keep"}, resource={"operation": "request", "object": "tool", "details": "sort"},
               tools=["cd", "sort"], instruction="sort is now available: sort final_report.pdf"),
        complete("sorted"),
        delegate("Move previous_report.pdf to temp and diff it with final_report.pdf", ["cd", "mv", "diff"]),
        complete("diff shown"),
    ]
    work = [
        call("cd", folder="document"), call("mkdir", dir_name="temp"),
        call("mv", source="final_report.pdf", destination="temp"), report("finish", "moved"),
        call("cd", folder="temp"), call("grep", file_name="final_report.pdf", pattern="budget analysis"),
        report("finish", "found the line"),
        report("revise", "no sort tool in my harness", request="give me the sort tool", resource="tool"),
        *([call("sort", file_name="final_report.pdf")] if sort_after_revision else []), report("finish", "sorted"),
        call("cd", folder=".."), call("mv", source="previous_report.pdf", destination="temp"),
        call("cd", folder="temp"), call("diff", file_name1="final_report.pdf", file_name2="previous_report.pdf"),
        report("finish", "diff done"),
    ]
    return models(orch, work)


def run(tmp_path, m):
    bench = BFCLBenchmark()
    task = bench.load_tasks({"category": "miss_func", "ids": ["multi_turn_miss_func_0"]})[0]
    return run_task(task, bench.make_env(task, {}), CFG, out_dir=tmp_path, models=m)


def test_miss_func_full_loop_with_tool_revision(tmp_path):
    r = run(tmp_path, script())
    assert r.success is True, r
    ev = events_of(r.events_path)
    kinds = [e["event"] for e in ev]
    assert kinds.count("complete") == 5  # one end action per user turn
    note = next(e for e in ev if e["event"] == "notification")
    assert "sort" in note["text"]
    rev = next(e for e in ev if e["event"] == "revise")
    assert "sort" in rev["harness"]["tools"] and "sort" not in rev["harness_before"]["tools"]
    reports = [e for e in ev if e["event"] == "report"]
    assert reports[2]["type"] == "revise" and rev["agent_id"] == reports[2]["agent_id"]  # same worker resumes
    assert any(e["event"] == "tool_call" and e["tool"] == "sort" and e["ok"] for e in ev)


def test_miss_func_full_loop_without_the_new_tool_fails(tmp_path):
    r = run(tmp_path, script(sort_after_revision=False))
    assert r.success is False
    assert "turn 3" in events_of(r.events_path)[-1]["check"]  # BFCL: the sort result is missing at turn 3
