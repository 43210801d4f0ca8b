"""SWE-bench adapter on the project's micro-repositories: local executor (git checkout + venv in the
sandbox), attempt semantics, and grading by the swebench package's own log parser and grader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("swebench")

from porchestra.envs.benchmark import BenchmarkError  # noqa: E402
from porchestra.envs.swebench import SWEBenchBenchmark  # noqa: E402
from porchestra.envs.swebench.instances import read_ids  # noqa: E402
from porchestra.protocol import EndTask, ToolCall  # noqa: E402

SUBMIT = EndTask(action="submit", reason="done")
PAPER_IDS = Path("/work/shared/data/swebench-verified-100-ids.json")


@pytest.fixture(scope="module")
def tasks():
    return SWEBenchBenchmark().load_tasks({"instances": "fixtures"})


def bash(command: str) -> ToolCall:
    return ToolCall(tool="bash", args={"command": command})


def test_gold_replay_resolves_all_and_truncated_gold_fails(tasks):
    bench = SWEBenchBenchmark()
    resolved = truncated = 0
    for task in tasks:
        env = bench.make_env(task, {})
        env.reset(task)
        try:
            calls, end = env.gold()
            assert end.action == "submit"
            for c in calls:
                assert env.execute(c, "worker-1").ok
            score = env.evaluate(end)
            resolved += bool(score.success)
            report = score.details["report"]
            assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == []
            assert report["tests_status"]["PASS_TO_PASS"]["failure"] == []
            env.reset(task)
            for c in calls[:-1]:
                env.execute(c, "worker-1")
            truncated += bool(env.evaluate(end).success)
        finally:
            env.close()
    assert resolved == len(tasks) == 3
    assert truncated == 0


def test_wrong_patches_are_graded_by_the_tests(tasks):
    task = tasks[0]  # ministats: median of even-length lists
    env = SWEBenchBenchmark().make_env(task, {})
    env.reset(task)
    try:
        # Fixes median but breaks mean: FAIL_TO_PASS passes, PASS_TO_PASS regresses.
        calls, _ = env.gold()
        env.execute(calls[0], "w")
        env.execute(bash("sed -i 's|return sum(values) / len(values)|return sum(values)|' ministats/core.py"), "w")
        s = env.evaluate(SUBMIT)
        st = s.details["report"]["tests_status"]
        assert s.success is False and st["PASS_TO_PASS"]["failure"] == ["tests/test_core.py::test_mean"]
        assert st["FAIL_TO_PASS"]["failure"] == []
        # A change that does not fix the bug: the FAIL_TO_PASS tests still fail.
        env.reset(task)
        env.execute(bash("echo '# touched' >> ministats/core.py"), "w")
        s = env.evaluate(SUBMIT)
        assert s.success is False and len(s.details["report"]["tests_status"]["FAIL_TO_PASS"]["failure"]) == 2
        # A patch that conflicts with the test patch cannot be graded as resolved.
        env.reset(task)
        env.execute(bash("rm tests/test_core.py"), "w")
        s = env.evaluate(SUBMIT)
        assert s.success is False
        # No submission at all.
        assert env.evaluate(None).success is False
    finally:
        env.close()


def test_attempt_semantics_revision_keeps_work_delegation_starts_fresh(tasks):
    task = tasks[1]
    env = SWEBenchBenchmark().make_env(task, {})
    env.reset(task)
    try:
        env.on_delegate("worker-1", fresh_attempt=True)  # untouched workspace: no restart
        assert env.attempt == 1
        env.execute(bash("echo 'X = 1' >> slugkit/slug.py && echo scratch > notes.txt"), "worker-1")
        env.on_delegate("worker-2", fresh_attempt=False)  # executor replacement / revision
        diff = env.executor.diff()
        assert "+X = 1" in diff and "notes.txt" in diff and env.attempt == 1
        env.on_delegate("worker-3", fresh_attempt=True)  # a new attempt discards unsubmitted work
        assert env.executor.diff() == "" and env.attempt == 2
        out = env.execute(bash("cat notes.txt; cd /tmp; pwd"), "worker-3")
        assert out.ok and "No such file" in out.output
        assert "/repo" in env.execute(bash("pwd"), "worker-3").output  # each command starts in the repo root
    finally:
        env.close()


def test_commands_are_sandboxed_and_time_limited(tasks):
    task = tasks[2]
    env = SWEBenchBenchmark().make_env(task, {"command_timeout": 2})
    env.reset(task)
    try:
        r = env.execute(bash("cat /work/main/pyproject.toml"), "w")
        assert r.ok and "[exit code 1]" in r.output  # the host's files are not there
        slow = env.execute(bash("sleep 10"), "w")
        assert not slow.ok and "timed out" in slow.error
        assert "exit code" not in env.execute(bash("python -c 'import pytest'"), "w").output  # venv sees pytest
    finally:
        env.close()


def test_hints_ids_and_limit(tmp_path, tasks):
    assert all("Hints" not in t.instruction for t in tasks)
    with_hints = SWEBenchBenchmark().load_tasks({"instances": "fixtures", "include_hints": True})
    assert "only the even case" in with_hints[0].instruction and with_hints[0].metadata["hints_included"]
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps(["porchestra__stockroom-1", "porchestra__ministats-1"]))
    got = SWEBenchBenchmark().load_tasks({"instances": "fixtures", "ids": str(ids)})
    assert [t.id for t in got] == ["porchestra__stockroom-1", "porchestra__ministats-1"]
    assert len(SWEBenchBenchmark().load_tasks({"instances": "fixtures", "limit": 1})) == 1
    with pytest.raises(BenchmarkError, match="not among the instances"):
        SWEBenchBenchmark().load_tasks({"instances": "fixtures", "ids": ["django__django-11099"]})
    with pytest.raises(BenchmarkError, match="instances"):
        SWEBenchBenchmark().load_tasks({})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"instance_id": "x"}) + "\n")
    with pytest.raises(BenchmarkError, match="lacks"):
        SWEBenchBenchmark().load_tasks({"instances": str(bad)})


def test_the_papers_id_list_ships_with_the_package():
    ids = read_ids("verified-100")
    assert len(ids) == len(set(ids)) == 100 and all("__" in i for i in ids)
    assert read_ids(["verified-100"]) == ids  # `--ids verified-100` reaches the loader as a one-item list
    if PAPER_IDS.exists():  # the copy it was taken from (shared/data, AOrchestra's list)
        assert ids == read_ids(str(PAPER_IDS))
