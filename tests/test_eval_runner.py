"""`porchestra eval`: gold replay, scripted runs, summary, resume after SIGKILL (exactly once)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import call, complete, delegate, report
from ledger_bench import LedgerBenchmark

from porchestra.config import RunConfig
from porchestra.eval.results import ResultStore
from porchestra.eval.runner import EvalPlan, EvalRunner
from porchestra.log.events import read_events

TESTS = Path(__file__).parent


def scripted_files(tmp_path: Path) -> tuple[str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    o, w = tmp_path / "orch.json", tmp_path / "work.json"
    o.write_text(json.dumps([delegate("buy an apple", ["buy"]), complete("3")]))
    w.write_text(json.dumps([call("buy", item="apple"), report("finish", "bought")]))
    return f"scripted:{o}", f"scripted:{w}"


def runner(tmp_path, policy="proactive", n=6, **kw):
    o, w = scripted_files(tmp_path)
    cfg = RunConfig(env="ledger", orchestrator_model=o, worker_model=w)
    plan = EvalPlan("ledger", {"n": n}, cfg, policy, **kw)
    return EvalRunner(LedgerBenchmark(), plan, tmp_path / "out")


def test_gold_is_perfect_and_truncated_gold_fails(tmp_path):
    tasks = LedgerBenchmark().load_tasks({"n": 6})
    rows = runner(tmp_path, "gold").run(tasks)
    assert len(rows) == 6 and all(r["success"] for r in rows)
    rows = runner(tmp_path / "t", "gold-truncated").run(tasks)
    assert len(rows) == 6 and not any(r["success"] for r in rows)


def test_scripted_eval_rows_and_resume(tmp_path):
    tasks = LedgerBenchmark().load_tasks({"n": 6})
    r = runner(tmp_path, trials=2)
    rows = r.run(tasks)
    assert len(rows) == 12
    by_task = {(x["task_id"], x["trial"]): x for x in rows}
    assert by_task[("ledger-000", 0)]["success"] is True  # "apple" alone: the scripted worker is right
    assert by_task[("ledger-001", 1)]["success"] is False
    for x in rows:
        assert {"task_id", "trial", "config_hash", "success", "score", "cost_usd", "reason"} <= x.keys()
        assert read_events(r.out / x["events"])[-1]["event"] == "task_end"
    again = runner(tmp_path, trials=2)
    assert again.pending(tasks) == []
    assert len(again.run(tasks)) == 12 and len(ResultStore(r.out / "results.jsonl").rows) == 12


def test_config_change_is_a_new_key(tmp_path):
    tasks = LedgerBenchmark().load_tasks({"n": 2})
    a = runner(tmp_path)
    a.run(tasks)
    b = runner(tmp_path, retries=0)
    b.plan.cfg = b.plan.cfg.model_copy(update={"mode": "proactive", "ablate": ["evidence"]})
    b.chash = b.plan.hash()
    assert b.chash != a.chash and len(b.pending(tasks)) == 2


def test_torn_last_line_is_cut_not_merged(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps({"task_id": "a", "trial": 0, "config_hash": "h"}) + "\n" + '{"task_id": "b", "tri')
    store = ResultStore(p)
    assert store.repaired_bytes > 0 and store.done() == {("a", 0, "h")}
    store.append({"task_id": "b", "trial": 0, "config_hash": "h"})
    lines = p.read_text().splitlines()
    assert [json.loads(x)["task_id"] for x in lines] == ["a", "b"]


def _eval_cmd(tmp_path: Path, out: Path, n: int) -> list[str]:
    o, w = scripted_files(tmp_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"env_options: {{n: {n}}}\n")
    return [sys.executable, "-m", "porchestra.cli", "eval", "ledger_bench:LedgerBenchmark", "--config", str(cfg),
            "--orchestrator-model", o, "--worker-model", w, "--out", str(out)]


def test_cli_eval_writes_summary(tmp_path):
    out = tmp_path / "ev"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    p = subprocess.run(_eval_cmd(tmp_path, out, 4), env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 4 and summary["overall"]["success_rate"] == 0.25
    assert "1-item" in summary["by_category"] and (out / "summary.md").read_text().startswith("# ")


def test_sigkill_then_resume_records_every_task_exactly_once(tmp_path):
    """Kill the eval process at random moments, resume each time: each task exactly once."""
    n = 40
    out = tmp_path / "ev"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    rng = random.Random(7)
    kills = 0
    for _ in range(4):
        proc = subprocess.Popen(_eval_cmd(tmp_path, out, n), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(rng.uniform(1.5, 4.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
    final = subprocess.run(_eval_cmd(tmp_path, out, n), env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(x)["task_id"], json.loads(x)["trial"]) for x in lines]
    assert len(keys) == len(set(keys)) == n, f"{kills} kills; {len(keys)} rows, {len(set(keys))} unique"
    for line in lines:
        row = json.loads(line)
        events = read_events(out / row["events"], strict=True)
        assert events[0]["event"] == "task_start" and events[-1]["event"] == "task_end"
