"""The `gold` policy: replay a task's reference actions through porchestra's own runtime.

No LLM is involved. It proves an adapter's tools and checker are wired correctly: gold must score
100% on the offline sets, and the truncated gold (last reference action dropped) must fail.

Gold runs through the same runtime as every mode — `run_task` with a control policy that delegates
the reference calls and a scripted worker that makes them — so harness checks, fault injection, the
model gateway and the event writer are the same code as in any run. A reference list may hold end
actions between calls (multi-turn BFCL): each closes a user turn, and the next turn gets a new worker.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..effects import EndRun
from ..envs.base import Environment, Score, Task
from ..log.events import read_events
from ..models.base import Completion, ModelExhausted, Usage
from ..parsing import parse_worker
from ..policies.base import ControlPolicy
from ..protocol import DelegateTask, EndTask, Handoff, ToolCall


class NoGold(ValueError):
    pass


class _GoldReplies:
    """The scripted worker: replies appended by the policy once the environment is reset (GAIA2 asks
    its server for the reference actions), consumed in order. Zero-priced."""

    name = "gold:worker"

    def __init__(self) -> None:
        self.replies: list[str] = []
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        with self._lock:
            if not self.replies:
                raise ModelExhausted("gold: no reference action left")
            return Completion(text=self.replies.pop(0), usage=Usage(0, 0))


class _NoOrchestrator:
    name = "gold:orchestrator"

    def complete(self, messages: list[dict[str, Any]], **kw: Any) -> Completion:
        raise ModelExhausted("gold: the orchestrator model is never asked")


def split_turns(actions: list[ToolCall | EndTask], ending: EndTask | None, truncated: bool
                ) -> tuple[list[tuple[list[ToolCall], EndTask | None]], EndTask | None]:
    """Reference actions → user turns (the calls of a turn, the end action closing it). Truncated:
    the last call is dropped; with no call to drop, the run ends without an end action."""
    if truncated:
        calls_at = [i for i, a in enumerate(actions) if not isinstance(a, EndTask)]
        if calls_at:
            actions = actions[:calls_at[-1]] + actions[calls_at[-1] + 1:]
        else:
            ending = None
    turns: list[tuple[list[ToolCall], EndTask | None]] = []
    calls: list[ToolCall] = []
    for a in actions:
        if isinstance(a, EndTask):
            turns.append((calls, a))
            calls = []
        else:
            calls.append(a)
    turns.append((calls, ending))
    return turns, ending


class GoldPolicy(ControlPolicy):
    """Each user turn: delegate one worker holding the turn's tools, whose scripted replies are the
    turn's reference calls then `finish`; when it hands back, give the turn's end action."""

    name = "gold"
    can_revise = False
    comm_actions = frozenset({"finish"})

    def __init__(self, env: Environment, truncated: bool = False):
        self.env, self.truncated = env, truncated
        self.worker = _GoldReplies()

    def parse_worker(self, rt: Any, text: str, comm: set[str]) -> Any:
        return parse_worker(text, comm, "json")  # the replies are porchestra's own, whatever the benchmark

    def decide(self, rt: Any, handoff: Handoff | None) -> tuple[Any, Any]:
        st = rt.policy_state
        if "turns" not in st:
            gold = self.env.gold()
            if gold is None:
                raise NoGold(f"task {rt.task.id} has no reference actions")
            st["turns"], st["ending"] = split_turns(*gold, self.truncated)
            st["turn"], st["delegated"] = 0, False
        turns = st["turns"]
        if st["turn"] >= len(turns):  # later user turns the environment still runs: the final end again
            return st["ending"], EndRun(st["ending"])
        calls, end = turns[st["turn"]]
        if not st["delegated"]:
            st["delegated"] = True
            self.worker.replies += [json.dumps({"action": c.tool, "params": c.args}) for c in calls]
            self.worker.replies.append(json.dumps({"action": "finish", "params": {
                "state": "reference actions replayed", "action": {"type": "finish"}}}))
            tools = sorted({c.tool for c in calls})  # none: the harness gets every tool
            d = DelegateTask(reasoning="gold: the reference actions", task_instruction=rt.task.instruction,
                             tools=tools, step_budget=len(calls) + 1)
            return d, rt.validate(d, None)
        st["turn"] += 1
        st["delegated"] = False
        return end, EndRun(end)  # None: truncated gold with no call left ends without an end action

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "name": "gold-truncated" if self.truncated else "gold"}


def gold_config(base: RunConfig | None = None) -> RunConfig:
    """The run's configuration with budgets no reference list runs into, and zero prices."""
    cfg = base or RunConfig()
    prices = {**cfg.prices, "gold:worker": [0, 0], "gold:orchestrator": [0, 0]}
    budgets = cfg.budgets.model_copy(update={"global_steps": 100_000, "max_workers": 10_000, "max_cost_usd": None})
    return cfg.model_copy(update={"prices": prices, "budgets": budgets})


def run_gold(task: Task, env: Environment, out_dir: str | Path, *, truncated: bool = False,
             run_id: str = "gold", cfg: RunConfig | None = None) -> tuple[Score, Path]:
    """Replay `task`'s reference actions in `env` through run_task; (score, events path)."""
    from ..run import Models, run_task

    policy = GoldPolicy(env, truncated)
    models = Models(_NoOrchestrator(), {"default": policy.worker})
    r = run_task(task, env, gold_config(cfg), out_dir=out_dir, models=models, policy=policy, run_id=run_id)
    end = read_events(r.events_path)[-1]  # the checker's verdict, as task_end recorded it
    return Score(success=r.success, score=r.score, reason=end.get("check") or "gold replay",
                 details=end.get("check_details") or {}), r.events_path
