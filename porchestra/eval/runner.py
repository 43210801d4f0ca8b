"""`porchestra eval`: many tasks × trials of one benchmark under one configuration.

Layout of an eval directory:
    OUT/results.jsonl                       one row per finished (task, trial, config hash)
    OUT/tasks/<task>__t<trial>__<hash>/     events.jsonl of that run
    OUT/summary.json, OUT/summary.md        written at the end
Resume = run the same command again: finished keys are skipped, unfinished task directories are
cleared and run again, so every task lands in results.jsonl exactly once. Infrastructure errors
(model API failures, checker or environment crashes) are retried and recorded apart from task
failures (`infra_error`).
"""

from __future__ import annotations

import json
import re
import shutil
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig
from ..envs.base import Task
from ..envs.benchmark import Benchmark, check_options
from ..log.events import read_events
from ..secrets import redactor_for
from .lock import EvalLock, task_dir_name
from .results import ResultStore, config_hash, row_key
from .results import disk_error  # a full disk stops the eval

INFRA_PREFIXES = ("model_error", "internal_error", "checker error", "infra")


@dataclass
class EvalPlan:
    bench_name: str
    options: dict[str, Any]
    cfg: RunConfig
    policy: str  # a mode name, or "gold" / "gold-truncated"
    trials: int = 1
    shard: tuple[int, int] = (0, 1)
    max_concurrency: int = 1
    retries: int = 2
    backend: str = "local"  # local | ray
    extra: dict[str, Any] = field(default_factory=dict)
    keep_infra: bool = False  # resume keeps infra-error rows instead of running them again

    def hash(self) -> str:
        opts = {k: v for k, v in self.options.items() if k not in ("limit", "ids", "shard")}
        return config_hash({"bench": self.bench_name, "options": opts, "policy": self.policy,
                            "config": self.cfg.model_dump(mode="json")})


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:120]


def select_tasks(tasks: list[Task], shard: tuple[int, int]) -> list[Task]:
    i, n = shard
    ordered = sorted(tasks, key=lambda t: t.id)
    return [t for k, t in enumerate(ordered) if k % n == i]


def is_infra(reason: str, success: Any) -> bool:
    return any(reason.startswith(p) for p in INFRA_PREFIXES)


def run_one(bench: Benchmark, plan: EvalPlan, task: Task, trial: int, out_dir: Path,
            model_cache: dict[str, Any]) -> dict[str, Any]:
    """Run one (task, trial) with retries on infrastructure errors; return its results row."""
    from ..run import build_models, run_task
    from .gold import run_gold

    attempts: list[str] = []
    row: dict[str, Any] = {}
    for attempt in range(plan.retries + 1):
        if out_dir.exists():
            shutil.rmtree(out_dir)  # a killed or failed attempt leaves nothing behind to merge with
        try:
            env = bench.make_env(task, plan.options)
            if plan.policy in ("gold", "gold-truncated"):
                score, events = run_gold(task, env, out_dir, truncated=plan.policy == "gold-truncated", cfg=plan.cfg)
                steps = sum(1 for e in read_events(events) if e["event"] == "tool_call")
                row = {"success": score.success, "score": score.score, "reason": score.reason or "gold replay",
                       "cost_usd": 0.0, "steps": steps, "tokens": {"input": 0, "output": 0}, "cost_by_component": {}}
            else:
                models = build_models(plan.cfg, model_cache)
                wrap = plan.extra.get("wrap_runtime")
                make_listeners = plan.extra.get("listeners")  # (task, trial) → this run's own listeners
                listeners = make_listeners(task, trial) if make_listeners else []
                try:
                    r = run_task(task, env, plan.cfg, out_dir=out_dir, models=models, listeners=listeners,
                                 wrap_runtime=wrap(task, trial) if wrap else None)
                finally:
                    for x in listeners:
                        getattr(x, "close", lambda: None)()
                row = {"success": r.success, "score": r.score, "reason": r.reason, "answer": r.answer,
                       "cost_usd": r.totals["cost_usd"], "steps": r.totals["steps"], "tokens": r.totals["tokens"],
                       "cost_by_component": r.totals["cost_by_component"], "cost_other": r.totals["cost_other"],
                       "workers": r.totals["workers"], "revisions": r.totals["revisions"]}
        except Exception as e:  # environment or adapter crash: infrastructure, retried
            if disk_error(e):  # the eval directory is full: no task can be recorded; stop the eval
                raise
            row = {"success": None, "score": None, "reason": f"infra: {type(e).__name__}: {e}",
                   "cost_usd": None, "steps": 0, "tokens": {"input": 0, "output": 0},
                   "traceback": traceback.format_exc(limit=5)}
        if not is_infra(str(row["reason"]), row["success"]):
            break
        attempts.append(str(row["reason"]))
    row.update({"infra_error": is_infra(str(row["reason"]), row["success"]), "infra_attempts": attempts})
    return row


class EvalRunner:
    def __init__(self, bench: Benchmark, plan: EvalPlan, out: Path,
                 on_row: Callable[[dict[str, Any]], None] | None = None,
                 on_start: Callable[[Task, int], None] | None = None):
        check_options(bench, plan.options)  # a misspelled option is named before the directory is touched
        self.bench, self.plan, self.out = bench, plan, out
        self.on_start = on_start  # told when a (task, trial) begins (the CLI shows what is in flight)
        # one writer per eval directory: taken before results.jsonl is read (and repaired); held until run() ends
        self.lock = EvalLock(out).acquire()
        self.store = ResultStore(out / "results.jsonl")
        self.chash = plan.hash()
        self.on_row = on_row
        # rows carry answers, error messages and tracebacks: keys are masked before anything is written
        self.redactor = redactor_for(plan.cfg.model_options.values())

    def pending(self, tasks: list[Task]) -> list[tuple[Task, int]]:
        # infra-error rows (the model API or the checker failed, not the task) are run again on resume
        done = {row_key(r) for r in self.store.rows if self.plan.keep_infra or not r.get("infra_error")}
        return [(t, k) for t in tasks for k in range(self.plan.trials) if (t.id, k, self.chash) not in done]

    def task_dir(self, task: Task, trial: int) -> Path:
        return self.out / "tasks" / task_dir_name(task.id, trial, self.chash)  # unique for any ids

    def _record(self, task: Task, trial: int, row: dict[str, Any]) -> dict[str, Any]:
        row = {"task_id": task.id, "trial": trial, "config_hash": self.chash, "category": task.category,
               "policy": self.plan.policy, "mode": self.plan.cfg.mode,
               "events": str(self.task_dir(task, trial).relative_to(self.out) / "events.jsonl"),
               "metadata": {k: v for k, v in task.metadata.items() if k != "answer"}, **row}
        row = json.loads(self.redactor.redact_text(json.dumps(row, ensure_ascii=False, default=str)))
        self.store.append(row)
        if self.on_row:
            self.on_row(row)
        return row

    def _run_one(self, task: Task, trial: int, cache: dict[str, Any]) -> dict[str, Any]:
        if self.on_start:
            self.on_start(task, trial)
        return run_one(self.bench, self.plan, task, trial, self.task_dir(task, trial), cache)

    def run(self, tasks: list[Task]) -> list[dict[str, Any]]:
        if self.lock._fd is None:  # a second run() of this runner
            self.lock.acquire()
            self.store = ResultStore(self.out / "results.jsonl")
        try:
            return self._run(tasks)
        finally:
            self.lock.release()

    def _run(self, tasks: list[Task]) -> list[dict[str, Any]]:
        todo = self.pending(tasks)
        if self.plan.backend == "ray":
            from .ray_backend import run_with_ray

            for task, trial, row in run_with_ray(self, todo):
                self._record(task, trial, row)
            return self.store.for_config(self.chash)
        cache: dict[str, Any] = {}
        if self.plan.max_concurrency <= 1:
            for task, trial in todo:
                self._record(task, trial, self._run_one(task, trial, cache))
        else:
            with ThreadPoolExecutor(max_workers=self.plan.max_concurrency) as pool:
                futures = {pool.submit(self._run_one, t, k, cache): (t, k) for t, k in todo}
                try:
                    for f in as_completed(futures):
                        t, k = futures[f]
                        self._record(t, k, f.result())
                except BaseException:  # e.g. a full disk: queued tasks are not started
                    for f in futures:
                        f.cancel()
                    raise
        return self.store.for_config(self.chash)
