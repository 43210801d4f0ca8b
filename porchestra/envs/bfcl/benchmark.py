"""BFCLBenchmark: BFCL v4 multi-turn entries (bfcl-eval package data).

Options: category (base | miss_func | miss_param | long_context; default base), ids (list or a file
with one id per line), limit.
"""

from __future__ import annotations

from typing import Any

from ..base import Environment, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from ..tau2.benchmark import read_ids
from .data import load_entries
from .env import BFCLEnv, user_text


class BFCLOptions(BenchmarkOptions):
    category: Any = None


class BFCLBenchmark(Benchmark):
    name = "bfcl"
    description = "BFCL v4 multi-turn (stateful backends, pre-scripted user turns, BFCL's checker)"
    Options = BFCLOptions

    @staticmethod
    def _category(options: dict[str, Any]) -> str:
        return options.get("category") or (options.get("env_options") or {}).get("category") or "base"

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        category = self._category(options)
        entries = load_entries(category)
        ids = read_ids(options.get("ids"))
        if ids is not None:
            known = {e["id"] for e, _ in entries}
            unknown = [i for i in ids if i not in known]
            if unknown:
                raise BenchmarkError(f"option ids: unknown BFCL id(s) for {category}: {', '.join(unknown[:5])}")
            wanted = set(ids)
            entries = [(e, gt) for e, gt in entries if e["id"] in wanted]
        limit = options.get("limit")
        if limit is not None:
            entries = entries[: int(limit)]
        return [Task(id=e["id"], instruction=user_text(e["question"][0]), category=category,
                     metadata={"category": category, "turns": len(e["question"]),
                               "involved_classes": e["involved_classes"],
                               "missed_function": e.get("missed_function") or {}},
                     payload={"entry": e, "ground_truth": gt})
                for e, gt in entries]

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        return BFCLEnv(category=task.metadata.get("category") or self._category(options))
