"""The one interleaved orchestrator/worker loop (paper Algorithm 1).

    decide → (delegate | revise | terminate | end) → run live workers until each hands off → decide …

A handoff is a worker report (finish / revise / stop), an exhausted step budget, a runtime error, or
an interruption chosen by the control policy (polling, triggers). A revision is appended to the
worker's own history and the *same* worker resumes. Budgets, cost caps and model failures end the
task cleanly with a recorded reason. Entry point: :func:`porchestra.run.run_task`.

The Runtime owns all task state. Policies and agents see it only through its RunContext
(porchestra/context.py); a decision is validated into a typed effect (porchestra/effects.py) and
`Runtime.execute` is the one place an effect changes the run.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from typing import Any

from .ablation import Ablation
from .agents import Orchestrator, Worker
from .context import RunContext
from .effects import CloseWorker, Continue, Effect, EndRun, ReviseWorker, StartWorkers, as_effect
from .config import RunConfig
from .envs.base import Environment, Task
from .harness import (DecisionError, apply_revision, harness_from_delegation, with_state_handoff,
                      worker_revision_view)
from .log.events import EventLog
from .models.gateway import Gateway
from .policies.base import ControlPolicy
from .prompting import PromptSet
from .protocol import (DelegateBatch, DelegateTask, EndTask, Handoff, Report, ReviseTask, Terminate,
                       ToolCall)
from .runaway import Guard
from .runtime_view import orchestrator_vars, render_report, tools_text
from .tools.base import Tool, ToolResult



class BudgetExhausted(Exception):
    """The task's global step budget or cost cap is spent."""


class Runtime:
    """All state of one task run. Created per task; nothing global."""

    def __init__(self, task: Task, env: Environment, cfg: RunConfig, policy: ControlPolicy,
                 models: "Models", log: EventLog, gateway: Gateway):
        self.task, self.env, self.cfg, self.policy = task, env, cfg, policy
        self.models, self.log, self.gateway = models, log, gateway
        self.prompts = PromptSet(env.prompt_set, (policy.prompt_dir,) if getattr(policy, "prompt_dir", None) else ())
        self.orchestrator = Orchestrator(models.orchestrator)
        self.workers: dict[str, Worker] = {}
        self.memory: list[str] = []
        self.updates: list[str] = []
        self.ablate = Ablation(cfg.ablate)  # what each ablation means: porchestra/ablation.py
        self.tool_layer: Any = env  # fault injection wraps this (same `tools`/`execute` signatures)
        self.policy_state: dict[str, Any] = {}  # per-task state of the control policy (plans, rounds)
        self.tool_layer = policy.wrap_tools(self.tool_layer, env, self.policy_state)  # e.g. candidate workspaces
        self.pending: deque[Handoff] = deque()  # handoffs waiting for a decision, oldest first
        self._inflight: dict[str, Future] = {}  # worker id → its thread (parallel policies only)
        self._pool: ThreadPoolExecutor | None = None
        self._halted = False
        self._decomposed: str | None = None  # a worker revised with task_scope decompose: the next delegation's parent
        self.guard = Guard(cfg, log)  # repeated actions, wall-clock deadline (runaway.py)
        self.ended_by_policy = False  # the policy ended the task without an end action
        self.ctx = RunContext(self)  # what policies and agents see of this run (not the runtime itself)

    # --- views used by agents and templates ------------------------------------------------------
    def all_tools(self) -> list[Tool]:
        return self.tool_layer.tools()

    def tool_names(self) -> list[str]:
        return [t.name for t in self.all_tools()]

    def tools_of(self, worker: Worker) -> list[Tool]:
        return [t for t in self.all_tools() if t.name in worker.harness.tools]

    def dispatch(self, call: ToolCall, worker: Worker) -> ToolResult:
        return self.tool_layer.execute(call, worker.id)

    def poll_notifications(self, worker: Worker | None) -> list[str]:
        notes = self.env.notifications()
        for n in notes:
            self.log.emit("notification", worker.id if worker else "orchestrator", None, text=n)
        self.updates.extend(notes)
        return notes

    def strip_ablated(self, report: Report) -> Report:
        return self.ablate.strip_report(report)

    def check_global_budget(self) -> None:
        self.guard.check_deadline()
        if self.log.step >= self.cfg.budgets.global_steps:
            raise BudgetExhausted(f"global step budget exhausted ({self.cfg.budgets.global_steps} steps)")
        cap = self.cfg.budgets.max_cost_usd
        if cap is not None:
            spent = self.gateway.spent_usd
            if spent >= cap:
                raise BudgetExhausted(f"cost cap reached (${spent:.4f} >= ${cap})")

    def revisable_worker(self, handoff: Handoff | None) -> Worker | None:
        if handoff is not None:
            w = self.workers.get(handoff.worker_id)
            return w if w is not None and w.status == "paused" else None
        paused = [w for w in self.workers.values() if w.status == "paused"]
        return paused[-1] if paused else None

    def orchestrator_vars(self, handoff: Handoff | None, allowed: list[str]) -> dict[str, Any]:
        return orchestrator_vars(self.ctx, handoff, allowed)

    def ask_orchestrator(self, handoff: Handoff | None, allowed: list[str]) -> tuple[Any, Any]:
        return self.orchestrator.decide(self.ctx, handoff, allowed, lambda d: self.validate(d, handoff))

    # --- decisions: validate (no side effects), then execute ---------------------------------------
    def validate(self, d: Any, handoff: Handoff | None) -> Effect:
        if isinstance(d, DelegateTask):
            return StartWorkers((self._validate_delegation(d, extra=0),), d.reasoning)
        if isinstance(d, DelegateBatch):
            if not d.tasks:
                raise DecisionError("delegate_tasks needs at least one task")
            return StartWorkers(tuple(self._validate_delegation(t, extra=i) for i, t in enumerate(d.tasks)),
                                d.reasoning)
        if isinstance(d, (ReviseTask, Terminate)):
            w = self.workers.get(d.worker_id) if d.worker_id else self.revisable_worker(handoff)
            if w is None or w.status != "paused":
                raise DecisionError("there is no paused SubAgent to revise or terminate; delegate_task or end the task")
            if isinstance(d, ReviseTask):
                if d.executor.operation == "replace":
                    self._check_model(d.executor.model)
                return ReviseWorker(d, w, apply_revision(w.harness, d, self.tool_names(), self.ablate))
            return CloseWorker(w, d.reason or d.reasoning or "terminated by the orchestrator")
        return as_effect(d, None)  # EndTask / Wait need no validation

    def _validate_delegation(self, d: DelegateTask, extra: int):
        if len(self.workers) + extra >= self.cfg.budgets.max_workers:
            raise DecisionError(f"SubAgent limit reached ({self.cfg.budgets.max_workers}); "
                                "revise the current SubAgent or end the task")
        return harness_from_delegation(d, self.tool_names(), self.cfg.budgets.worker_steps,
                                       self.cfg.worker_model_names())

    def _check_model(self, name: str | None) -> None:
        names = self.cfg.worker_model_names()
        if name is not None and name not in names and name not in names.values():
            raise DecisionError(f"unknown model {name!r}; available models: {', '.join(names)}")

    def execute(self, effect: Effect, handoff: Handoff | None) -> EndTask | None:
        """The one place a decision changes the run: workers start, are revised or end; the task ends."""
        if handoff is not None:
            w = self.workers[handoff.worker_id]
            self.memory.append(render_report(w, handoff, self.ablate))
        if isinstance(effect, StartWorkers):
            plan = effect.harnesses
            parent, report = (handoff.worker_id, handoff.report) if handoff is not None else (None, None)
            scope = report.task_scope.operation if report is not None else None
            if self._decomposed is not None and parent in (None, self._decomposed):  # the rest of a revise_task decompose
                parent, scope = self._decomposed, "decompose"
            self._decomposed = None
            handoff_state = report is not None and report.resource.object == "state_handoff"
            if parent is not None and self.workers[parent].status == "paused":
                why = (f"decomposed into {len(plan)} sub-task(s)" if scope == "decompose"
                       else "superseded by a new delegation")
                self._close(self.workers[parent], why)
            for harness in plan:  # each child's delegate event names its parent (lineage)
                self._start_worker(with_state_handoff(harness, parent, report) if handoff_state else harness,
                                   fresh_attempt=True, reasoning=effect.reasoning, parent=parent,
                                   lineage="decompose" if scope == "decompose" else None)
        elif isinstance(effect, ReviseWorker):
            self._revise(effect.revision, effect.worker, effect.outcome)
        elif isinstance(effect, CloseWorker):
            self._close(effect.worker, effect.reason, by="orchestrator")
        elif isinstance(effect, EndRun):
            d = effect.end
            self.log.emit("complete", "orchestrator", None, action=d.action, reasoning=d.reasoning,
                          **{complete_key(self.env.end_field): self.env.end_value(d)})
            return d
        elif not isinstance(effect, Continue):
            raise TypeError(f"unknown effect {effect!r}")
        return None

    def _start_worker(self, harness: Any, fresh_attempt: bool, replaces: str | None = None,
                      reasoning: str = "", parent: str | None = None, lineage: str | None = None) -> Worker:
        wid = f"worker-{len(self.workers) + 1}"
        model = self.models.worker(harness.model)
        w = Worker(wid, harness, model)
        w.messages = [{"role": "system", "content": self.prompts.render(
                          self.policy.worker_templates[0], comm_actions=sorted(self.policy.comm_actions,
                                                                  key=["finish", "revise", "stop"].index),
                          ablate=sorted(self.ablate), harness=harness, **self.env.prompt_vars())},
                      {"role": "user", "content": self.prompts.render(
                          self.policy.worker_templates[1], harness=harness, task=self.task,
                          tools_text=tools_text(self.tools_of(w)), **self.env.prompt_vars())}]
        self.workers[wid] = w
        self.env.on_delegate(wid, fresh_attempt)
        self.log.emit("delegate", wid, "orchestrator", harness=harness.model_dump(),
                      model_name=model.name, replaces=replaces, reasoning=reasoning, parent=parent,
                      lineage=lineage)
        return w

    def _revise(self, d: ReviseTask, w: Worker, outcome: Any) -> None:
        self.log.emit("revise", w.id, "orchestrator", revision=d.model_dump(exclude_none=True),
                      harness=outcome.harness.model_dump(), harness_before=w.harness.model_dump(),
                      ignored=outcome.ignored)
        if outcome.remove:  # task_scope remove: this path ends here
            self._close(w, f"task scope removed: {d.task_scope.details or d.task_scope.object}".rstrip(": "),
                        by="orchestrator")
            return
        if d.executor.operation == "replace":
            self._close(w, "executor replaced")  # the state handoff travels with the replacement
            self._start_worker(with_state_handoff(outcome.harness, w.id, w.reports[-1] if w.reports else None),
                               fresh_attempt=False, replaces=w.id, parent=w.id, lineage="replace")
            return
        if outcome.decompose:  # this worker keeps one part; the next delegation is the rest (harness.py)
            self._decomposed = w.id
        subgoal_changed = outcome.harness.subgoal != w.harness.subgoal
        w.harness = outcome.harness
        added = [t for t in self.all_tools() if t.name in outcome.added_tools]
        view = worker_revision_view(d, outcome, self.ablate, self.cfg.revision_reasoning)
        w.append_user(self.prompts.render("revision.j2", view=view, outcome=outcome, harness=w.harness,
                                          subgoal_changed=subgoal_changed, remaining=w.remaining,
                                          added_tools_text=tools_text(added)))
        w.status = "running"

    def _close(self, w: Worker, reason: str, by: str = "runtime") -> None:
        if w.live:
            w.status = "terminated"
            self.log.emit("terminate", w.id, "orchestrator", reason=reason, by=by)

    # --- running workers ---------------------------------------------------------------------------
    def _resume(self, pending: deque[Handoff]) -> None:
        """Run live workers until the next handoff. With a parallelism of 1 (the paper's setting) they
        run in turn on this thread; otherwise each runs in its own thread and every handoff is
        answered as soon as it arrives while the others keep running."""
        if pending:
            return  # answer every queued handoff first
        running = [w for w in self.workers.values() if w.status == "running" and w.id not in self._inflight]
        parallel = self.policy.parallelism(self.ctx)
        if parallel == 1:
            pending.extend(self._run_until_handoff(w) for w in running)
            return
        if running and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="porchestra-worker")
        for w in running:
            self._inflight[w.id] = self._pool.submit(self._run_until_handoff, w)
        if not self._inflight:
            return
        done, _ = wait(list(self._inflight.values()), return_when=FIRST_COMPLETED)
        for wid, future in list(self._inflight.items()):  # several at once: in start order
            if future in done:
                del self._inflight[wid]
                pending.append(future.result())

    def _halt_workers(self) -> None:
        """The task is over: workers still running hand off at their next step; wait for them."""
        self._halted = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _run_until_handoff(self, w: Worker) -> Handoff:
        while True:
            if self._halted:
                h = Handoff(worker_id=w.id, kind="notification", detail="the task ended")
                break
            if self.env.is_stopped():
                h = Handoff(worker_id=w.id, kind="notification", detail="the environment stopped")
                break
            if w.remaining <= 0:
                h = Handoff(worker_id=w.id, kind="budget_exhausted",
                            detail=f"step budget of {w.harness.step_budget} used up")
                break
            self.check_global_budget()
            result = w.step(self.ctx)
            if isinstance(result, Handoff):
                h = result
                break
            runaway = self.guard.after_worker_step(w)
            if runaway is not None:
                h = runaway
                break
            interrupt = self.policy.after_step(self.ctx, w, result)
            if interrupt is not None:
                kind, detail = interrupt
                h = Handoff(worker_id=w.id, kind=kind, detail=detail)
                break
        h.recent_steps = [asdict(r) for r in w.recent[-5:]]
        self._settle(w, h)
        return h

    def _settle(self, w: Worker, h: Handoff) -> None:
        """Worker status after a handoff: paused (live, revisable) or over."""
        if self.policy.keeps_worker(h):
            w.status = "paused"
        elif h.report is not None:
            w.status = "finished" if h.report.type == "finish" else "stopped"
        else:
            w.status = "paused"  # _close needs a live worker to log its end
            self._close(w, h.detail or h.kind)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> EndTask | None:
        try:
            return self._loop()
        finally:
            self._halt_workers()
            for w in self.workers.values():  # every worker's life ends with a recorded event
                self._close(w, "the task ended")

    def _loop(self) -> EndTask | None:
        pending = self.pending
        while True:
            if self.env.is_stopped():
                return None
            if not pending:
                self.poll_notifications(None)
            handoff = pending.popleft() if pending else None
            decision, plan = self.policy.decide(self.ctx, handoff)
            self.guard.after_decision(decision, handoff, self.updates)
            effect = as_effect(decision, plan)
            if isinstance(effect, EndRun) and effect.end is None:
                self.ended_by_policy = True
                return None  # the policy ends the task without an end action (truncated gold)
            end = self.execute(effect, handoff)
            if end is not None:
                next_message = self.env.end_turn(end)
                if next_message is None:
                    return end
                self.updates.append(f"New user message: {next_message}")
                continue
            self._resume(pending)


def complete_key(end_field: str) -> str:
    """The `complete` event's key for the end value: the environment's end_field, except SWE-bench's
    `reason`, logged as `submission` since event log v1 (the log never renames a field)."""
    return "submission" if end_field == "reason" else end_field


class Models:
    """The orchestrator model and the worker models by name ("default" = the configured default)."""

    def __init__(self, orchestrator: Any, workers: dict[str, Any], specs: dict[str, str] | None = None,
                 orchestrator_spec: str | None = None):
        self.orchestrator = orchestrator
        self.workers = workers
        self.specs = specs or {}  # name → spec, so a decision may name either
        self.orchestrator_spec = orchestrator_spec  # None: an injected object, not built from a spec

    def describe(self) -> dict[str, Any]:
        """The models that actually run (`task_start.models`): each object's own name, and the spec
        it was built from (None for an injected object)."""
        return {"orchestrator": {"name": _name(self.orchestrator), "spec": self.orchestrator_spec},
                "workers": {k: {"name": _name(m), "spec": self.specs.get(k)} for k, m in self.workers.items()}}

    def worker(self, name: str | None) -> Any:
        if name is None:
            return self.workers["default"]
        for key, model in self.workers.items():
            if name in (key, model.name, self.specs.get(key)):
                return model
        raise DecisionError(f"unknown worker model {name!r}")


def _name(model: Any) -> str:
    return getattr(model, "name", None) or type(model).__name__
