"""A tiny deterministic world for the reliability suite (no sandbox, no network, no LLM).

`VaultEnv` holds a few key/value facts; workers `lookup` keys, `echo` text back (so a scripted episode
can put any text — injection, control characters, huge blobs, a canary — into a tool result) and the
checker compares the final answer with the task's `metadata["answer"]`. `VaultBenchmark` exposes N
such tasks to `porchestra eval` as `porchestra.reliability.world:VaultBenchmark` (option `n`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..envs.base import Environment, Score, Task
from ..envs.benchmark import Benchmark
from ..protocol import EndTask
from ..tools.base import ToolError, tool_from_function

FACTS = {"alpha": "17", "beta": "23", "gamma": "391", "delta": "42"}


class VaultEnv(Environment):
    name = "vault"
    prompt_set = "general"

    def __init__(self) -> None:
        self.task: Task | None = None
        self.calls = 0
        self._tools = self._make_tools()

    def reset(self, task: Task) -> None:
        self.task = task
        self.calls = 0

    def tools(self):
        return list(self._tools)

    @staticmethod
    def _make_tools():
        def lookup(key: str) -> str:
            """The value stored under a key (alpha, beta, gamma, delta)."""
            if key not in FACTS:
                raise ToolError(f"no such key: {key!r}")
            return FACTS[key]

        def echo(text: str) -> str:
            """Return the text unchanged."""
            return text

        return [tool_from_function(lookup), tool_from_function(echo)]

    def execute(self, call, agent_id):
        self.calls += 1
        return super().execute(call, agent_id)

    def evaluate(self, end: EndTask | None) -> Score:
        want = (self.task.metadata.get("answer") if self.task else None)
        if want is None:
            return Score(success=None, reason="no expected answer")
        ok = end is not None and str(end.answer).strip() == str(want)
        return Score(success=ok, score=float(ok), reason=f"answer={end and end.answer!r} expected={want!r}")


# ids that collide once sanitised or truncated to a directory name (real τ² telecom ids share long prefixes)
COLLIDING = ["a/b", "a_b", "a b", "a:b", "t" * 150 + "-1", "t" * 150 + "-2"]


class VaultBenchmark(Benchmark):
    """`n` short tasks (default 6): look a key up and report its value."""

    name = "vault"
    description = "reliability suite: tiny deterministic lookup tasks"

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        n = int(options.get("n", 6))
        keys = sorted(FACTS)
        tid = COLLIDING[:n].__getitem__ if options.get("colliding_ids") else (lambda i: f"vault-{i:04d}")
        tasks = [Task(id=tid(i), instruction=f"Report the value stored under {keys[i % 4]}.",
                      category=keys[i % 4], metadata={"answer": FACTS[keys[i % 4]], "key": keys[i % 4]})
                 for i in range(n)]
        ids = options.get("ids")
        tasks = [t for t in tasks if not ids or t.id in ids]
        return tasks[: int(options["limit"])] if options.get("limit") else tasks

    def make_env(self, task: Task, options: dict[str, Any]) -> VaultEnv:
        if options.get("crash_with_env_var"):  # an adapter whose error message carries a credential
            var = options["crash_with_env_var"]
            raise RuntimeError(f"backend login failed for {var}={os.environ.get(var)}")
        return VaultEnv()


# --- Appendix F replies (the suite builds scripted episodes from these) ---------------------------
def delegate(instruction: str, tools: list[str], budget: int | None = None, **params: Any) -> str:
    p: dict[str, Any] = {"task_instruction": instruction, "context": "", "tools": tools, **params}
    if budget is not None:
        p["step_budget"] = budget
    return json.dumps({"action": "delegate_task", "reasoning": "delegate", "params": p})


def revise(**params: Any) -> str:
    return json.dumps({"action": "revise_task", "reasoning": "revise", "params": params})


def terminate(reason: str = "enough") -> str:
    return json.dumps({"action": "terminate", "reasoning": reason, "params": {"reason": reason}})


def complete(answer: str) -> str:
    return json.dumps({"action": "complete", "reasoning": "done", "params": {"answer": answer}})


def call(tool: str, **args: Any) -> str:
    return json.dumps({"action": tool, "params": args, "memory": ""})


def report(kind: str, state: str = "", request: str = "", resource: str = "none") -> str:
    return json.dumps({"action": kind, "params": {
        "state": state,
        "action": {"type": kind, "task_scope": {"operation": "keep", "object": "", "details": ""},
                   "resource": {"operation": "keep" if resource == "none" else "request", "object": resource,
                                "details": request},
                   "request": request, "reason": "because"},
        "evidence": {"summary": state, "raw": {}}}, "memory": ""})
