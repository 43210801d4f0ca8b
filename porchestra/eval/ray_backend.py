"""`--backend ray`: the same (task, trial) runs as Ray tasks; rows come back to the driver, which
alone writes results.jsonl (so resume and exactly-once hold as in the local backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from ..envs.base import Task

if TYPE_CHECKING:
    from .runner import EvalRunner


def _remote_run(bench_name: str, plan_state: dict[str, Any], task_json: dict[str, Any], trial: int,
                out_dir: str) -> dict[str, Any]:
    from pathlib import Path

    from ..config import RunConfig
    from ..envs.benchmark import load_benchmark
    from .runner import EvalPlan, run_one

    plan = EvalPlan(bench_name=bench_name, options=plan_state["options"],
                    cfg=RunConfig.model_validate(plan_state["cfg"]), policy=plan_state["policy"],
                    retries=plan_state["retries"])
    bench = load_benchmark(bench_name)
    return run_one(bench, plan, Task.model_validate(task_json), trial, Path(out_dir), {})


def run_with_ray(runner: "EvalRunner", todo: list[tuple[Task, int]]) -> Iterator[tuple[Task, int, dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise ValueError("--backend ray needs Ray: pip install 'porchestra[ray]'") from None
    if not ray.is_initialized():
        address = runner.plan.extra.get("ray_address")
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 **({} if address else {"num_cpus": max(runner.plan.max_concurrency, 1)}))
    remote = ray.remote(_remote_run)
    plan = runner.plan
    state = {"options": plan.options, "cfg": plan.cfg.model_dump(mode="json"), "policy": plan.policy,
             "retries": plan.retries}
    refs = {remote.remote(plan.bench_name, state, t.model_dump(), k, str(runner.task_dir(t, k))): (t, k)
            for t, k in todo}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            t, k = refs[ref]
            yield t, k, ray.get(ref)
