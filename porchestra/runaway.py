"""Runaway protection: an agent repeating itself, and an optional wall-clock deadline.

A small model often settles into a fixed point: the same tool call with the same arguments and the
same result, step after step (SmolLM2-135M: `execute_python("help")` 25+ times), or an orchestrator
making the same decision on the same handoff again and again. Budgets end such a run eventually,
but only after hundreds of model calls. The guard watches each agent's consecutive identical
actions:

- after `budgets.repeat_warn` identical ones it adds a corrective observation (worker: to its next
  user turn; orchestrator: to the run's updates, which its prompt shows);
- after `budgets.max_repeats` it ends that agent with a recorded reason: a worker hands off with
  kind "error" and detail "runaway: ..." (the loop closes it with that reason, the orchestrator
  decides what next); the orchestrator ends the task: RunStopped("runaway: ...").

`budgets.deadline_s` bounds a task's wall-clock time (RunStopped("deadline: ..."), checked before
every agent turn; in `porchestra eval` it applies to each task). Unset, runs whose models are all
embedded `local:` ones get LOCAL_DEADLINE_S (300 s); 0 turns the deadline off. run_task records
`e.reason` as the task's ending reason. One guard per task run; nothing global.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from .protocol import Handoff

OUTPUT_CHARS = 2000  # results compared on their first characters (long outputs rarely differ only later)


class RunStopped(Exception):
    """The task ends early for a recorded reason ("runaway: ..." or "deadline: ...")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _signature(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)


def _short(value: Any, n: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= n else text[: n - 3] + "..."


def effective_deadline(cfg: Any) -> float | None:
    """budgets.deadline_s; when unset and every agent model is an embedded `local:` one, a default of
    LOCAL_DEADLINE_S, so a run on the embedded model always ends in bounded time (a small model on
    a busy CPU can take minutes per reply). 0 means no deadline."""
    set_ = cfg.budgets.deadline_s
    if set_ is not None:
        return set_ or None
    specs = [cfg.orchestrator_model, *cfg.worker_model_names().values()]
    return LOCAL_DEADLINE_S if all(str(s).startswith("local:") for s in specs) else None


LOCAL_DEADLINE_S = 300.0


class Guard:
    def __init__(self, cfg: Any, log: Any, clock: Callable[[], float] = time.monotonic):
        budgets = cfg.budgets
        self.warn_at = budgets.repeat_warn
        self.max_repeats = budgets.max_repeats
        self.deadline_s = effective_deadline(cfg)
        self.log = log
        self.clock = clock
        self.started = clock()
        self._last: dict[str, tuple[str, int]] = {}  # agent id → (last action signature, repeats)
        self._seen: dict[str, int] = {}  # agent id → index of its last tool_call event checked

    # --- the deadline ------------------------------------------------------------------------------
    def check_deadline(self) -> None:
        if self.deadline_s is None:
            return
        elapsed = self.clock() - self.started
        if elapsed >= self.deadline_s:
            raise RunStopped(f"deadline: {elapsed:.0f} s of wall-clock time used "
                             f"(budgets.deadline_s = {self.deadline_s:g})")

    # --- repetition ----------------------------------------------------------------------------------
    def _count(self, agent: str, sig: str) -> int:
        last, n = self._last.get(agent, ("", 0))
        n = n + 1 if sig == last else 1
        self._last[agent] = (sig, n)
        return n

    def after_worker_step(self, worker: Any) -> Handoff | None:
        """Call after each worker step that did not hand off. Returns the handoff that ends the
        worker once it repeated the same tool call with the same result `max_repeats` times."""
        call = self._last_tool_call(worker.id)
        if call is None:  # a format error or similar: counted by max_format_errors instead
            self._last.pop(worker.id, None)
            return None
        sig = _signature(call.get("tool"), call.get("args"), call.get("ok"),
                         str(call.get("output") or "")[:OUTPUT_CHARS], call.get("error"))
        n = self._count(worker.id, sig)
        what = f"{call.get('tool')}({_short(call.get('args'))})"
        if self.max_repeats and n >= self.max_repeats:
            reason = (f"runaway: {what} repeated {n} times in a row with the same result")
            self.log.emit("runaway", worker.id, "orchestrator", action=what, repeats=n, ended=True)
            return Handoff(worker_id=worker.id, kind="error", detail=reason)
        if self.warn_at and n == self.warn_at:
            self.log.emit("runaway", worker.id, "orchestrator", action=what, repeats=n, ended=False)
            worker.append_user(
                f"Note: you have now called {what} {n} times in a row and got the same result each "
                "time. Repeating it will not change the result. Do something different that moves the "
                "subtask forward, or report (finish with what you have, or ask for what you need).")
        return None

    def after_decision(self, decision: Any, handoff: Handoff | None, updates: list[str]) -> None:
        """Call after each orchestrator decision. Raises RunStopped once it made the same decision on
        the same kind of handoff `max_repeats` times in a row."""
        data = decision.model_dump(mode="json", exclude={"reasoning"}) if hasattr(decision, "model_dump") else decision
        seen = None if handoff is None else _signature(
            handoff.kind, handoff.detail, handoff.recent_steps,
            handoff.report.model_dump(mode="json", exclude={"memory"}) if handoff.report is not None else None)
        n = self._count("orchestrator", _signature(data, seen))
        what = _short(data, 160)
        if self.max_repeats and n >= self.max_repeats:
            self.log.emit("runaway", "orchestrator", None, action=what, repeats=n, ended=True)
            raise RunStopped(f"runaway: the orchestrator made the same decision {n} times in a row "
                             f"with the same outcome: {what}")
        if self.warn_at and n == self.warn_at:
            self.log.emit("runaway", "orchestrator", None, action=what, repeats=n, ended=False)
            updates.append(f"Note: you have made the same decision {n} times in a row and it came back "
                           "the same way each time. Change the approach (a different subtask, context or "
                           "tools), or end the task with the best answer you have.")

    def _last_tool_call(self, agent: str) -> dict[str, Any] | None:
        """The tool_call event of `agent` logged since its previous check, if any (scanning back
        from the end; with parallel workers other agents' events interleave)."""
        events = self.log.events
        stop = self._seen.get(agent, -1)
        for i in range(len(events) - 1, stop, -1):
            e = events[i]
            if e.get("event") == "tool_call" and e.get("agent_id") == agent:
                self._seen[agent] = i
                return e
        return None


__all__ = ["Guard", "LOCAL_DEADLINE_S", "RunStopped", "effective_deadline"]
