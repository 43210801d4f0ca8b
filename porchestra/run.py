"""Run one task end to end: event log, models, environment, loop, scoring, totals.

    result = run_task(task, env, cfg, out_dir="runs/x")

Every way a run can end is a recorded reason in `task_end`; nothing but a bug in porchestra itself
escapes as an exception (and even then `task_end` is written first).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .agents import AgentFailed
from .config import RunConfig
from .envs.base import Environment, Score, Task
from .log.events import EventLog, Listener
from .log.totals import compute_totals
from .loop import BudgetExhausted, Models, Runtime
from .models.base import Model, ModelError, ModelExhausted
from .models.gateway import Gateway
from .models.pricing import PriceTable
from .models.registry import get_model, make_model
from .policies import make_policy
from .policies.base import ControlPolicy
from .protocol import EndTask
from .runaway import RunStopped
from .secrets import Redactor, redactor_for


@dataclass
class TaskResult:
    task_id: str
    success: bool | None
    score: float | None
    reason: str
    answer: str | None
    totals: dict[str, Any]
    events_path: Path


def build_models(cfg: RunConfig, cache: dict[str, Model] | None = None) -> Models:
    """Instantiate the orchestrator and worker models; identical specs share one object (one copy
    of local weights in memory)."""
    cache = {} if cache is None else cache
    local: dict[str, Model] = {}  # scripted/replay models hold per-task state: never shared across tasks

    def get(spec: str, role: str) -> Model:
        stateful = spec.split(":", 1)[0] in ("scripted", "replay")
        store, key = (local, f"{role}|{spec}") if stateful else (cache, f"{spec}|{cfg.options_for(role)!r}")
        if key not in store:
            store[key] = make_model(spec, role, cfg.options_for(role))
        return store[key]

    workers = {name: get(spec, "worker") for name, spec in cfg.worker_model_names().items()}
    for role in ("judge", "user"):  # built now so a bad spec or a missing key fails before any call
        get_model(role, cfg, cache=cache)
    return Models(get(cfg.orchestrator_model, "orchestrator"), workers, cfg.worker_model_names(),
                  orchestrator_spec=cfg.orchestrator_model)


def with_env_budgets(cfg: RunConfig, env: Environment) -> RunConfig:
    """A benchmark's default budgets (SWE-bench: 500 / 50) apply where the user set none."""
    b = cfg.budgets
    defaults = {k: v for k, v in env.default_budgets.items() if k not in b.model_fields_set}
    return cfg.model_copy(update={"budgets": b.model_copy(update=defaults)}) if defaults else cfg


def _configured_models(cfg: RunConfig) -> dict[str, Any]:
    """`task_start.models` when run_task builds the models itself: exactly the configured specs."""
    return {"orchestrator": {"name": cfg.orchestrator_model, "spec": cfg.orchestrator_model},
            "workers": {k: {"name": s, "spec": s} for k, s in cfg.worker_model_names().items()}}


def run_task(task: Task, env: Environment, cfg: RunConfig, *, out_dir: str | Path,
             models: Models | None = None, policy: ControlPolicy | None = None,
             run_id: str | None = None, listeners: Iterable[Listener] = (),
             redactor: Redactor | None = None,
             wrap_runtime: Callable[[Runtime], None] | None = None) -> TaskResult:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_id = run_id or uuid.uuid4().hex[:12]
    cfg = with_env_budgets(cfg, env)
    policy = policy or make_policy(cfg.mode)
    listeners = list(listeners)
    if redactor is None:  # keys named by the config, whatever their variable is called
        redactor = redactor_for(cfg.model_options.values())
    log = EventLog(out / "events.jsonl", run_id, task.id, redactor=redactor, listeners=listeners)
    end: EndTask | None = None
    reason = "completed"
    score = Score(success=None, reason="not evaluated")
    try:
        log.emit("task_start", task=task.model_dump(exclude={"payload"}),
                 config={**cfg.model_dump(mode="json"), "policy": policy.describe()},
                 environment={"name": env.name, **env.describe()},
                 models=models.describe() if models is not None else _configured_models(cfg))
        try:
            models = models or build_models(cfg)
            env.reset(task)
            progress = [getattr(x, "call_started") for x in listeners if hasattr(x, "call_started")]
            role_models: dict[str, Model] = {}  # judge / user simulator: built with model_options.<role>
            gateway = Gateway(log, PriceTable(cfg.prices), thinking=env.thinking,
                              on_start=progress[0] if progress else None,
                              resolve_model=lambda spec, role: get_model(role, cfg, spec=spec, cache=role_models))
            env.bind_gateway(gateway)
            rt = Runtime(task, env, cfg, policy, models, log, gateway)
            if cfg.faults:  # configured faults wrap the tool layer first; wrap_runtime may add more
                from .faults import install_faults
                install_faults(rt, cfg.faults, cfg.seed)
            if wrap_runtime is not None:
                wrap_runtime(rt)  # e.g. fault injection around rt.tool_layer
            end = rt.run()
            if end is None:
                reason = "ended_without_end_action" if rt.ended_by_policy else "environment_stopped"
        except BudgetExhausted as e:
            reason = f"budget_exhausted: {e}"
        except RunStopped as e:  # runaway agent or wall-clock deadline (porchestra/runaway.py)
            reason = e.reason
        except AgentFailed as e:
            reason = f"orchestrator_failed: {e}"
        except ModelExhausted as e:
            reason = f"model_exhausted: {e}"
        except ModelError as e:
            reason = f"model_error: {e}"
        try:
            score = env.evaluate(end)
        except Exception as e:  # a checker crash is an infrastructure problem, not a task failure
            score = Score(success=None, reason=f"checker error: {type(e).__name__}: {e}")
        finally:
            env.close()
        if reason.startswith("model_error"):  # the model/API failed after retries: not a task failure
            score = Score(success=None, score=None, reason="not scored: the run ended on a model/API error",
                          details=score.details)
        elif score.success is None and (score.reason or "").startswith(("checker error", "infra")):
            reason = score.reason or reason  # the checker's environment failed: the row is an infra error
    except BaseException as e:
        reason = f"internal_error: {type(e).__name__}: {e}"
        log.emit("task_end", success=None, score=None, reason=reason, totals=compute_totals(log.events))
        log.close()
        raise
    totals = compute_totals(log.events)
    # a checker whose own environment failed (a crash, or e.g. swebench's infra_failure reasons: "infra: ...")
    infra_end = reason.startswith("model_error") or (score.reason or "").startswith(("checker error", "infra"))
    infra = {"infra_error": True} if infra_end else {}
    log.emit("task_end", success=score.success, score=score.score, reason=reason,
             check=score.reason, check_details=score.details, totals=totals, **infra)
    log.close()
    answer = env.end_value(end)  # results rows and summaries are written from this: no keys in it
    return TaskResult(task.id, score.success, score.score, redactor.redact_text(reason),
                      None if answer is None else redactor.redact_text(answer), totals, out / "events.jsonl")
