"""Reliability properties 2, 3, 6: API faults, SIGKILL + resume, budgets (fast settings; full in slow)."""

from __future__ import annotations

import pytest

from porchestra.reliability.api_faults import run_api_faults
from porchestra.reliability.budgets import check_episode, run_budgets
from porchestra.reliability.crash import run_crash
from porchestra.config import Budgets


def test_api_faults_every_episode_ends_cleanly_and_the_log_accounts_for_every_request(tmp_path):
    r = run_api_faults(episodes=20, rate=0.3, workdir=tmp_path)
    assert r.passed, r.failures[:5]
    f = r.figures
    assert f["observed_fault_share"] >= 0.25 and f["retries_logged"] > 0 and f["lost_or_duplicated"] == 0
    assert f["ends"] == {"finished": 20, "model_error": 2}
    assert set(f["faults_by_kind"]) >= {"429", "500", "cut", "garbage"}


def test_sigkill_then_resume_small(tmp_path):
    r = run_crash(tasks=30, kills=3, workdir=tmp_path)
    assert r.passed, r.failures[:5]
    assert r.figures["distinct_tasks"] == r.figures["rows_after_resume"] == 30
    assert r.figures["kills_landed_mid_run"] == 3 and r.figures["event_logs_bad"] == 0


def test_budgets_property_based(tmp_path):
    r = run_budgets(examples=100, workdir=tmp_path)
    assert r.passed, r.failures[:5]
    assert r.figures["crashes"] == 0 and r.figures["episodes"] >= 100


def test_budget_checker_catches_overruns():
    b = Budgets(global_steps=3, max_workers=1, worker_steps=1, max_cost_usd=0.01)
    ev = [{"event": "delegate", "agent_id": "worker-1", "step": 1, "harness": {"step_budget": 1}},
          {"event": "delegate", "agent_id": "worker-2", "step": 2, "harness": {"step_budget": 1}},
          *[{"event": "llm_call", "agent_id": "worker-1", "step": 3 + i, "cost_usd": 0.01} for i in range(2)],
          {"event": "terminate", "agent_id": "worker-1", "step": 5, "reason": ""},
          {"event": "task_end", "step": 5, "reason": "weird"}]
    problems = " ".join(check_episode(ev, b))
    for needle in ("global steps", "2 workers", "took 2 steps", "after the cap", "without a reason", "task_end"):
        assert needle in problems


@pytest.mark.slow
def test_full_api_faults_and_crash(tmp_path):
    assert run_api_faults(episodes=50, workdir=tmp_path).passed
    r = run_crash(tasks=120, kills=8, max_concurrency=4, workdir=tmp_path)
    assert r.passed, r.failures[:5]


def test_event_log_reopened_after_a_kill_cuts_the_torn_line_instead_of_merging(tmp_path):
    from porchestra.log.events import EventLog, read_events

    p = tmp_path / "events.jsonl"
    with EventLog(p, "r1", "t") as log:
        log.emit("task_start", task={}, config={})
    with p.open("a") as fh:
        fh.write('{"v": 1, "run_id": "r1", "event": "llm_c')  # killed mid-write
    assert [e["event"] for e in read_events(p)] == ["task_start"]  # tolerant read drops it
    with EventLog(p, "r2", "t") as log:
        assert log.repaired_bytes > 0
        log.emit("task_end", success=None, score=None, reason="x", totals={})
    assert [e["event"] for e in read_events(p, strict=True)] == ["task_start", "task_end"]
