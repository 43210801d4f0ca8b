"""BFCL v4 multi-turn adapter: ground-truth calls replayed turn by turn through porchestra's tool
layer pass BFCL's own checker; dropping the last call fails it (real bfcl-eval data and backends)."""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval")

from porchestra.envs.benchmark import BenchmarkError  # noqa: E402
from porchestra.envs.bfcl import BFCLBenchmark, BFCLEnv  # noqa: E402
from porchestra.protocol import EndTask, ToolCall  # noqa: E402

# The ground truth of this entry calls `tail` in turn 1, but the entry withholds `tail` until turn 3;
# a tool layer that really withholds the function cannot replay it (BFCL's checker alone never notices).
UNREACHABLE_GOLD = {"miss_func": {"multi_turn_miss_func_49"}}


def replay(env: BFCLEnv, task, drop_last: bool = False):
    """reset → gold(); execute calls, call end_turn at each in-list EndTask, end the last turn, evaluate."""
    env.reset(task)
    try:
        items, end = env.gold()
        if drop_last:
            last = max(i for i, x in enumerate(items) if isinstance(x, ToolCall))
            items = items[:last] + items[last + 1:]
        for x in items:
            if isinstance(x, EndTask):
                assert env.end_turn(x) is not None, "script ended early"
            else:
                env.execute(x, "gold")
        assert env.end_turn(end) is None
        return env.evaluate(end)
    finally:
        env.close()


def check_category(category: str) -> None:
    bench = BFCLBenchmark()
    tasks = bench.load_tasks({"category": category})
    assert len(tasks) == 200
    failed, truncated_passed = [], []
    for task in tasks:
        env = bench.make_env(task, {})
        if not replay(env, task).success:
            failed.append(task.id)
        if replay(env, task, drop_last=True).success is not False:
            truncated_passed.append(task.id)
    assert set(failed) == UNREACHABLE_GOLD.get(category, set())
    assert truncated_passed == []


@pytest.mark.parametrize("category", ["base", "miss_func"])
def test_gold_all_entries(category):
    check_category(category)


@pytest.mark.slow
@pytest.mark.parametrize("category", ["miss_param", "long_context"])
def test_gold_all_entries_other_categories(category):
    check_category(category)


def test_miss_func_tool_appears_at_its_turn():
    bench = BFCLBenchmark()
    task = bench.load_tasks({"category": "miss_func", "ids": ["multi_turn_miss_func_0"]})[0]
    env = bench.make_env(task, {})
    env.reset(task)
    assert "sort" not in {t.name for t in env.tools()}
    refused = env.execute(ToolCall(tool="sort", args={"file_name": "final_report.pdf"}), "w")
    assert not refused.ok and "unknown tool" in refused.error
    messages = [env.end_turn(EndTask(answer="ok")) for _ in range(3)]
    assert messages[:2] == [q[0]["content"] for q in task.payload["entry"]["question"][1:3]]
    assert "updated some more functions" in messages[2]
    assert "sort" in {t.name for t in env.tools()}
    notes = env.notifications()
    assert len(notes) == 1 and "sort" in notes[0] and env.notifications() == []


def test_unfinished_script_and_wrong_state_fail():
    bench = BFCLBenchmark()
    task = bench.load_tasks({"category": "base", "limit": 1})[0]
    env = bench.make_env(task, {})
    env.reset(task)
    items, end = env.gold()
    for x in items:
        if isinstance(x, EndTask):
            break
        env.execute(x, "w")
    score = env.evaluate(end)  # only the first of several turns played
    assert score.success is False and "user turns" in score.reason
    env.reset(task)
    assert env.execute(ToolCall(tool="mkdir", args={"dir_name": "unexpected"}), "w").ok
    items, end = env.gold()
    for x in items:
        env.end_turn(x) if isinstance(x, EndTask) else env.execute(x, "w")
    env.end_turn(end)
    score = env.evaluate(end)
    assert score.success is False and score.details["error_type"] == "multi_turn:instance_state_mismatch"


def test_tools_have_json_schemas_and_errors_are_observations():
    bench = BFCLBenchmark()
    task = bench.load_tasks({"category": "base", "limit": 1})[0]
    env = bench.make_env(task, {})
    env.reset(task)
    tools = env.tools()
    assert tools and all(t.parameters.get("type") == "object" for t in tools)
    r = env.execute(ToolCall(tool="cd", args={"nonsense": 1}), "w")
    assert not r.ok and r.error.startswith("Error during execution")


def test_options_are_validated():
    bench = BFCLBenchmark()
    with pytest.raises(BenchmarkError, match="category"):
        bench.load_tasks({"category": "web_search"})
    with pytest.raises(BenchmarkError, match="ids"):
        bench.load_tasks({"category": "base", "ids": ["nope"]})
    assert len(bench.load_tasks({"category": "miss_param", "limit": 3})) == 3


def test_eval_gold_policy_replays_multi_turn_gold(tmp_path):
    """porchestra's `gold` policy (porchestra.eval.gold) on BFCL: in-list EndTasks end user turns."""
    from porchestra.eval.gold import run_gold

    bench = BFCLBenchmark()
    for task in bench.load_tasks({"category": "miss_func", "limit": 5}):
        score, _ = run_gold(task, bench.make_env(task, {}), tmp_path / task.id)
        assert score.success is True, (task.id, score.reason)
        score, _ = run_gold(task, bench.make_env(task, {}), tmp_path / f"{task.id}-t", truncated=True)
        assert score.success is False, task.id
