"""Shared fixtures: a small project-authored environment with deterministic tools and checker, and
helpers to build scripted replies in the Appendix F formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from porchestra.config import RunConfig
from porchestra.envs.base import Environment, Score, Task
from porchestra.models.scripted import ScriptedModel
from porchestra.protocol import EndTask
from porchestra.run import Models
from porchestra.tools.base import ToolError, tool_from_function


class LedgerEnv(Environment):
    """A tiny stateful bookkeeping world: look up prices, record purchases, check the total.

    Success = the final answer equals the sum of recorded purchases and the ledger matches the
    task's expected items. Deterministic; used to exercise every loop path without an LLM."""

    name = "ledger"
    prompt_set = "general"

    PRICES = {"apple": 3, "pear": 5, "plum": 7}

    def __init__(self, events: list[str] | None = None):
        self.ledger: list[str] = []
        self.calls = 0
        self._events = list(events or [])
        self.task: Task | None = None

    def reset(self, task: Task) -> None:
        self.task = task
        self.ledger = []

    def tools(self):
        prices = self.PRICES

        def price(item: str) -> int:
            """Price of an item."""
            if item not in prices:
                raise ToolError(f"no such item: {item}")
            return prices[item]

        def buy(item: str) -> str:
            """Record a purchase of one item."""
            if item not in prices:
                raise ToolError(f"no such item: {item}")
            self.ledger.append(item)
            return f"bought {item}"

        def total() -> int:
            """Sum of recorded purchases."""
            return sum(prices[i] for i in self.ledger)

        return [tool_from_function(price), tool_from_function(buy), tool_from_function(total)]

    def execute(self, call, agent_id):
        self.calls += 1
        return super().execute(call, agent_id)

    def notifications(self) -> list[str]:
        if self.calls == 0:  # exogenous events arrive once work is under way
            return []
        out, self._events = self._events[:1], self._events[1:]
        return out

    def gold(self):
        from porchestra.protocol import ToolCall

        items = self.task.metadata.get("items", [])
        return ([ToolCall(tool="buy", args={"item": i}) for i in items],
                EndTask(action="complete", answer=str(sum(self.PRICES[i] for i in items))))

    def evaluate(self, end: EndTask | None) -> Score:
        want = sorted(self.task.metadata.get("items", []))
        ok = end is not None and sorted(self.ledger) == want and str(end.answer).strip() == str(
            sum(self.PRICES[i] for i in want))
        return Score(success=ok, score=float(ok), reason=f"ledger={self.ledger} answer={end and end.answer}")


def delegate(instruction: str, tools: list[str], budget: int | None = None, **kw: Any) -> str:
    params: dict[str, Any] = {"task_instruction": instruction, "context": kw.pop("context", ""), "tools": tools}
    if budget is not None:
        params["step_budget"] = budget
    params.update(kw)
    return json.dumps({"action": "delegate_task", "reasoning": "delegate", "params": params})


def revise(**params: Any) -> str:
    return json.dumps({"action": "revise_task", "reasoning": "revise", "params": params})


def complete(answer: str) -> str:
    return json.dumps({"action": "complete", "reasoning": "done", "params": {"answer": answer}})


def call(tool: str, **args: Any) -> str:
    return json.dumps({"action": tool, "params": args, "memory": ""})


def report(kind: str, state: str = "", request: str = "", scope: str = "keep", resource: str = "none",
           raw: dict | None = None) -> str:
    return json.dumps({"action": kind, "params": {
        "state": state,
        "action": {"type": kind, "task_scope": {"operation": scope, "object": "", "details": ""},
                   "resource": {"operation": "keep" if resource == "none" else "request", "object": resource,
                                "details": request},
                   "request": request, "reason": "because"},
        "evidence": {"summary": "ev", "raw": raw or {}}}, "memory": ""})


def models(orch: list[str], work: list[str]) -> Models:
    o = ScriptedModel(orch, name="scripted:orchestrator")
    w = ScriptedModel(work, name="scripted:worker")
    return Models(o, {"default": w})


@pytest.fixture
def cfg() -> RunConfig:
    return RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")


@pytest.fixture
def ledger_task() -> Task:
    return Task(id="t1", instruction="Buy an apple and a pear, then report the total.",
                metadata={"items": ["apple", "pear"]})


def events_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
