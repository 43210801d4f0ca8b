"""The LedgerEnv as a benchmark (importable as `ledger_bench:LedgerBenchmark` with tests/ on the path)."""

from __future__ import annotations

import itertools
from typing import Any

from conftest import LedgerEnv

from porchestra.envs.base import Task
from porchestra.envs.benchmark import Benchmark


class LedgerBenchmark(Benchmark):
    name = "ledger"

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        n = int(options.get("n", 6))
        combos = [c for r in (1, 2) for c in itertools.combinations(sorted(LedgerEnv.PRICES), r)]
        tasks = [Task(id=f"ledger-{i:03d}", instruction=f"Buy {' and '.join(items)}; report the total.",
                      category=f"{len(items)}-item", metadata={"items": list(items)})
                 for i, items in zip(range(n), itertools.cycle(combos))]
        ids = options.get("ids")
        tasks = [t for t in tasks if not ids or t.id in ids]
        return tasks[: options["limit"]] if options.get("limit") else tasks

    def make_env(self, task: Task, options: dict[str, Any]) -> LedgerEnv:
        return LedgerEnv()
