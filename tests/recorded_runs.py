"""Scripted runs recorded once per test session, shared by the report, viewer and exporter tests.

Four configurations (one directory each) over two ledger tasks:
    proactive      t1 ✓  t2 ✓
    proactive-flt  t1 ✓ (revoke buy → revise → purchase)   t2 ✗ (revoke buy, never recovers)
    aorchestra     t1 ✓  t2 ✗ (wrong answer)
    no-evidence    t1 ✓  t2 ✗ (ablate evidence)
Every LLM reply uses 100 input / 10 output tokens; orchestrator calls cost $0.12, worker calls $0.012.
"""

from __future__ import annotations

from pathlib import Path

from conftest import call, complete, delegate, models, report, revise
from test_policies import AltLedgerEnv

from porchestra.config import RunConfig
from porchestra.envs.base import Task
from porchestra.policies.boundary import AOrchestraPolicy
from porchestra.run import run_task

PRICES = {"scripted:orchestrator": [1000, 2000], "scripted:worker": [100, 200]}
T1 = Task(id="t1", instruction="Buy an apple and a pear, then report the total.",
          metadata={"items": ["apple", "pear"], "future_events": 0})
T2 = Task(id="t2", instruction="Buy an apple, then report the total.",
          metadata={"items": ["apple"], "future_events": [{"at": 3}, {"at": 9}]})


def u(text: str) -> dict:
    return {"text": text, "usage": {"input": 100, "output": 10}}


def _clean(task: Task, answer: str):
    items = task.metadata["items"]
    work = [call("buy", item=i) for i in items] + [call("total"), report("finish", f"total {answer}",
                                                                         raw={"total": answer})]
    return [u(delegate("buy the items", ["buy", "total"])), u(complete(answer))], [u(w) for w in work]


def _recovering():
    orch = [delegate("buy apple and pear", ["buy", "total"]),
            revise(tools=["purchase", "total"], context="buy was revoked; use purchase"), complete("8")]
    work = [call("buy", item="apple"),
            report("revise", "buy is unavailable", "give me another purchase tool", resource="tool",
                   raw={"error": "tool 'buy' is unavailable"}),
            call("purchase", item="apple"), call("purchase", item="pear"), call("total"), report("finish", "total 8")]
    return [u(x) for x in orch], [u(x) for x in work]


def _stuck():
    orch = [delegate("buy an apple", ["buy", "total"]), complete("0")]
    work = [call("buy", item="apple"), call("total"), report("finish", "nothing bought")]
    return [u(x) for x in orch], [u(x) for x in work]


def record(root: Path) -> dict[str, Path]:
    base = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json", prices=PRICES)
    plans = {
        "proactive": (base, None, [(T1, _clean(T1, "8")), (T2, _clean(T2, "3"))]),
        "proactive-flt": (base.model_copy(update={"faults": [{"type": "revoke", "target": "buy"}]}), None,
                          [(T1, _recovering()), (T2, _stuck())]),
        "aorchestra": (base.model_copy(update={"mode": "aorchestra"}), AOrchestraPolicy,
                       [(T1, _clean(T1, "8")), (T2, _clean(T2, "4"))]),
        "no-evidence": (base.model_copy(update={"ablate": ["evidence"]}), None,
                        [(T1, _clean(T1, "8")), (T2, _clean(T2, "5"))]),
    }
    dirs = {}
    for label, (cfg, policy, tasks) in plans.items():
        for task, (orch, work) in tasks:
            run_task(task, AltLedgerEnv(), cfg, out_dir=root / label / "tasks" / task.id, models=models(orch, work),
                     policy=policy() if policy else None, run_id=f"{label}-{task.id}")
        dirs[label] = root / label
    return dirs
