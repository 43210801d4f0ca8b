"""τ²-bench adapter: the gold actions replayed through porchestra's tool layer score 100%, and a
gold run missing its last state-changing action fails (LLM-free; real inspect-evals domains)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("inspect_evals.tau2")

from porchestra.envs.benchmark import BenchmarkError  # noqa: E402
from porchestra.envs.tau2 import Tau2Benchmark, Tau2Env  # noqa: E402
from porchestra.protocol import ToolCall  # noqa: E402

READ_ONLY = ("get_", "find_", "list_", "search_", "check_", "calculate", "transfer_to_human_agents",
             "run_speed_test", "can_send_mms")


def replay(env: Tau2Env, task, drop: int | None = None):
    """reset → gold() → execute each gold call (except index `drop`) → evaluate(gold end).
    Returns the score and the indices of gold calls that changed state (ok, not read-only)."""
    env.reset(task)
    try:
        calls, end = env.gold()
        writes = []
        for i, c in enumerate(calls):
            if i == drop:
                continue
            if env.execute(c, "gold").ok and not c.tool.startswith(READ_ONLY):
                writes.append(i)
        return env.evaluate(end), writes
    finally:
        env.close()


def check_gold(domain: str, tasks) -> tuple[int, int, int]:
    """Gold passes every task; gold without its last successful write fails every task that has one
    (a trailing read, or a write the domain refuses, changes no τ² check)."""
    bench = Tau2Benchmark()
    ok = truncated_fail = truncated_n = 0
    for task in tasks:
        env = bench.make_env(task, {"domain": domain})
        score, writes = replay(env, task)
        assert score.success, (task.id, score.reason)
        ok += 1
        if writes:
            truncated_n += 1
            bad, _ = replay(env, task, drop=writes[-1])
            assert bad.success is False, (task.id, "truncated gold passed")
            truncated_fail += 1
    return ok, truncated_fail, truncated_n


def sample(tasks, k: int, seed: int = 0):
    return tasks if len(tasks) <= k else random.Random(seed).sample(tasks, k)


def test_telecom_solo_gold_all_base_tasks():
    tasks = Tau2Benchmark().load_tasks({"domain": "telecom"})
    assert len(tasks) >= 50 and all(t.metadata["solo"] for t in tasks)
    ok, bad, n = check_gold("telecom", tasks)
    assert ok == len(tasks) and bad == n and n >= 50


def test_retail_gold_sample():
    tasks = Tau2Benchmark().load_tasks({"domain": "retail"})
    assert len(tasks) == 114
    ok, bad, n = check_gold("retail", sample(tasks, 6))
    assert ok == 6 and bad == n > 0


def test_airline_gold_sample():
    tasks = Tau2Benchmark().load_tasks({"domain": "airline"})
    ok, bad, n = check_gold("airline", sample(tasks, 2, seed=1))
    assert ok == 2 and bad == n


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_gold_all_tasks(domain):
    tasks = Tau2Benchmark().load_tasks({"domain": domain})
    ok, bad, n = check_gold(domain, tasks)
    assert ok == len(tasks) and bad == n


def test_db_check_catches_a_wrong_write():
    bench = Tau2Benchmark()
    task = next(t for t in bench.load_tasks({"domain": "retail"})
                if any(a["name"] == "cancel_pending_order" for a in t.payload["task"]["evaluation_criteria"]["actions"]))
    env = bench.make_env(task, {})

    env.reset(task)
    calls, end = env.gold()
    for c in calls:
        if c.tool == "cancel_pending_order":
            other = "ordered by mistake" if c.args["reason"] == "no longer needed" else "no longer needed"
            c = c.model_copy(update={"args": {**c.args, "reason": other}})
        env.execute(c, "gold")
    score = env.evaluate(end)
    assert score.success is False
    assert score.details["checks"]["DB"]["ok"] is False


def test_tool_errors_and_bad_arguments_are_observations():
    task = Tau2Benchmark().load_tasks({"domain": "retail", "limit": 1})[0]
    env = Tau2Benchmark().make_env(task, {})
    env.reset(task)
    r = env.execute(ToolCall(tool="get_order_details", args={"order_id": "#W0000000"}), "w")
    assert not r.ok and "not found" in r.error.lower()
    r = env.execute(ToolCall(tool="get_order_details", args={"order": "#W0000000"}), "w")
    assert not r.ok and "invalid arguments" in r.error
    assert {t.name for t in env.tools()} >= {"send_message_to_user", "get_user_details", "cancel_pending_order"}
    env.close()


def test_episodes_do_not_share_state():
    bench = Tau2Benchmark()
    task = bench.load_tasks({"domain": "telecom", "limit": 1})[0]
    a, b = bench.make_env(task, {}), bench.make_env(task, {})
    a.reset(task)
    b.reset(task)
    calls, _ = a.gold()
    assert calls
    for c in calls:
        assert a.execute(c, "w").ok
    assert a.state.db_hashes() != b.state.db_hashes()


def test_options_are_validated():
    bench = Tau2Benchmark()
    with pytest.raises(BenchmarkError, match="domain"):
        bench.load_tasks({"domain": "banking"})
    with pytest.raises(BenchmarkError, match="solo"):
        bench.load_tasks({"domain": "retail", "solo": True})
    with pytest.raises(BenchmarkError, match="split"):
        bench.load_tasks({"domain": "telecom", "split": "nope"})
    with pytest.raises(BenchmarkError, match="ids"):
        bench.load_tasks({"domain": "retail", "ids": ["no-such-task"]})
    assert [t.id for t in bench.load_tasks({"domain": "retail", "ids": ["5", "7"]})] == ["5", "7"]
    small = bench.load_tasks({"domain": "telecom", "split": "small", "limit": 3})
    assert len(small) == 3 and small[0].instruction == small[0].payload["task"]["ticket"]


def test_eval_gold_policy_on_telecom(tmp_path):
    """porchestra's `gold` policy (porchestra.eval.gold): gold passes, last action dropped fails."""
    from porchestra.eval.gold import run_gold

    bench = Tau2Benchmark()
    for task in bench.load_tasks({"domain": "telecom", "limit": 5}):
        assert run_gold(task, bench.make_env(task, {}), tmp_path / "g")[0].success is True
        assert run_gold(task, bench.make_env(task, {}), tmp_path / "t", truncated=True)[0].success is False
