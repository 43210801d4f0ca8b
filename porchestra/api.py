"""The library surface behind `import porchestra` (see docs/api.md).

    import porchestra as po
    result = po.run("What is 2+3?", env=MyEnv(), orchestrator=po.ScriptedModel([...]),
                    worker=po.ScriptedModel([...]), out_dir="runs/x")
    result.success, result.answer, result.reason, result.totals, result.events_path

`run` is one task (what `porchestra run` does); `evaluate` is a benchmark (what `porchestra eval`
does, without the progress bar). Both take the same configuration as the CLI — a `RunConfig`, a YAML
path, or keyword overrides — and both write the same event logs.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .config import RunConfig, load_config
from .envs.base import Environment, Task
from .envs.benchmark import Benchmark, BenchmarkError, check_options, load_benchmark
from .log.events import Listener
from .models.base import Model
from .policies.base import ControlPolicy
from .run import Models, TaskResult, run_task

ModelLike = Model | str  # a Model object or a model spec ("openai:gpt-4o-mini", "scripted:replies.json")


def _config(config: RunConfig | str | Path | None, overrides: dict[str, Any]) -> RunConfig:
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(config, RunConfig):
        if not overrides:
            return config
        return RunConfig.model_validate({**config.model_dump(), **overrides})
    return load_config(config, overrides)


def _model(m: ModelLike, role: str, cfg: RunConfig) -> tuple[Model, str | None]:
    if isinstance(m, str):
        from .models.registry import make_model

        return make_model(m, role, cfg.options_for(role)), m
    return m, None


def build_run_models(cfg: RunConfig, orchestrator: ModelLike | None, worker: ModelLike | None,
                     workers: dict[str, ModelLike] | None) -> Models:
    """Models for one task: objects as given, specs (or the config's, where a role is not given)
    instantiated. An injected object is recorded in `task_start.models` under its own name."""
    o, o_spec = _model(orchestrator if orchestrator is not None else cfg.orchestrator_model, "orchestrator", cfg)
    given = {"default": worker if worker is not None else cfg.worker_model,
             **(workers if workers is not None else cfg.worker_models)}
    built = {name: _model(m, "worker", cfg) for name, m in given.items()}
    specs = {name: spec for name, (_, spec) in built.items() if spec is not None}
    return Models(o, {name: model for name, (model, _) in built.items()}, specs, orchestrator_spec=o_spec)


def resolve_env(task: str | Task, env: str | Environment, cfg: RunConfig) -> tuple[Task, Environment]:
    """A Task and its Environment from what the caller gave. A string task is free text, or, for a
    benchmark, the id of one of its tasks."""
    if isinstance(env, Environment):
        return (task if isinstance(task, Task) else Task(id="task", instruction=task)), env
    if env == "general":
        from .envs.general import general_env_from_options

        the_task = task if isinstance(task, Task) else Task(id="task", instruction=task)
        return the_task, general_env_from_options(cfg.env_options)  # an unknown key is a named error
    if isinstance(task, Task):
        options = {**cfg.env_options, "judge_model": cfg.judge_model, "user_model": cfg.user_model}
        bench = load_benchmark(env)
        check_options(bench, options)
        return task, bench.make_env(task, options)
    return benchmark_task(task, env, cfg)


def benchmark_task(task: str, env: str, cfg: RunConfig, field: str = "task") -> tuple[Task, Environment]:
    """The benchmark task whose id is `task`, or free text where the benchmark's environment can take
    one (errors name `field`, the caller's name for the argument)."""
    bench = load_benchmark(env)
    options = {**cfg.env_options, "judge_model": cfg.judge_model, "user_model": cfg.user_model}
    check_options(bench, options)
    try:
        found = [t for t in bench.load_tasks({**options, "ids": [task]}) if t.id == task]
    except BenchmarkError:  # no data set to look ids up in: still fine for free text
        if bench.free_text_task(task, options) is None:
            raise
        found = []
    if not found:  # not an id: free text, where the benchmark's environment can take one
        free = bench.free_text_task(task, options)
        if free is None:
            raise BenchmarkError(f"{field}: no task with id {task!r} in benchmark {env!r}")
        found = [free]
    return found[0], bench.make_env(found[0], options)


def run(task: str | Task, env: str | Environment = "general", *, orchestrator: ModelLike | None = None,
        worker: ModelLike | None = None, workers: dict[str, ModelLike] | None = None,
        mode: str | None = None, policy: ControlPolicy | None = None,
        config: RunConfig | str | Path | None = None, out_dir: str | Path | None = None,
        listeners: Iterable[Listener] = (), **overrides: Any) -> TaskResult:
    """Run one task end to end; return its result (the event log is at `result.events_path`).

    `overrides` are RunConfig fields (`budgets={"global_steps": 20}`, `ablate=["context"]`, ...);
    `out_dir` defaults to a new temporary directory."""
    cfg = _config(config, {"mode": mode, **overrides,
                           **({"env": env} if isinstance(env, str) else {})})
    the_task, environment = resolve_env(task, env, cfg)
    models = build_run_models(cfg, orchestrator, worker, workers)
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="porchestra-run-"))
    return run_task(the_task, environment, cfg, out_dir=out, models=models, policy=policy, listeners=listeners)


@dataclass
class EvalResult:
    out_dir: Path
    rows: list[dict[str, Any]]  # one results row per (task, trial): success, reason, cost_usd, events …
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def success_rate(self) -> float | None:
        scored = [r for r in self.rows if r.get("success") is not None]
        return sum(bool(r["success"]) for r in scored) / len(scored) if scored else None


def evaluate(benchmark: str | Benchmark, *, out_dir: str | Path, mode: str | None = None,
             config: RunConfig | str | Path | None = None, options: dict[str, Any] | None = None,
             policy: str | None = None, trials: int = 1, shard: tuple[int, int] = (0, 1),
             max_concurrency: int = 1, retries: int = 2, **overrides: Any) -> EvalResult:
    """Evaluate a benchmark like `porchestra eval` (resumable: the same call again skips finished
    runs). `options` are the benchmark's options (`ids`, `limit`, `split`, ...); `policy` "gold" or
    "gold-truncated" replays reference actions."""
    from .eval.runner import EvalPlan, EvalRunner, select_tasks
    from .eval.summary import write_summary
    from .policies import make_policy

    name = benchmark if isinstance(benchmark, str) else benchmark.name
    cfg = _config(config, {"mode": mode, "env": name, **overrides})
    bench = load_benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    the_policy = policy or cfg.mode
    if policy is None:
        make_policy(cfg.mode)  # an unknown mode fails before any task runs
    opts = {k: v for k, v in {**cfg.env_options, **(options or {}), "policy": the_policy,
                              "judge_model": cfg.judge_model, "user_model": cfg.user_model}.items()
            if v is not None}
    check_options(bench, opts)
    plan = EvalPlan(name, opts, cfg, the_policy, trials, shard, max_concurrency, retries)
    bench.setup(opts)
    tasks = select_tasks(bench.load_tasks(opts), plan.shard)
    out = Path(out_dir)
    runner = EvalRunner(bench, plan, out)
    rows = runner.run(tasks)
    wanted = {t.id for t in tasks}
    rows = [r for r in rows if r["task_id"] in wanted]
    summary = write_summary(out, rows, f"{name} · {the_policy} · {runner.chash}")
    return EvalResult(out, rows, summary)
