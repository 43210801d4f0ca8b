"""`porchestra eval BENCH …` — mounted on the main CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..cli import USER_ERRORS, _common_overrides, build_config, default_out, fail
from ..envs.benchmark import BenchmarkError, load_benchmark
from ..policies import make_policy
from .runner import EvalPlan, EvalRunner, select_tasks
from .summary import write_summary


def _parse_shard(shard: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise BenchmarkError(f"--shard must look like i/N (e.g. 0/4), got {shard!r}") from None
    if n < 1 or not 0 <= i < n:
        raise BenchmarkError(f"--shard {shard!r}: need 0 <= i < N")
    return i, n


def _read_ids(ids: Optional[str]) -> list[str] | None:
    if ids is None:
        return None
    p = Path(ids)
    if p.is_file():
        text = p.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
            if isinstance(data, list):
                return [str(x) for x in data]
        except json.JSONDecodeError:
            pass
        return [line.strip() for line in text.splitlines() if line.strip()]
    if "/" in ids or ids.endswith((".json", ".txt")):
        raise BenchmarkError(f"--ids: file not found: {ids}")
    return [x.strip() for x in ids.split(",") if x.strip()]


def eval_cmd(
    bench: str = typer.Argument(..., help="Benchmark: gaia2, gaia, swebench, tau2, bfcl, general, or module:attr."),
    mode: Optional[str] = typer.Option(None, help="Control mode (default proactive)."),
    policy: Optional[str] = typer.Option(None, help="'gold' / 'gold-truncated' replays reference actions (no LLM)."),
    orchestrator_model: Optional[str] = typer.Option(None),
    worker_model: Optional[str] = typer.Option(None),
    out: Optional[Path] = typer.Option(None, help="Eval directory; rerun the same command to resume."),
    config: Optional[Path] = typer.Option(None, "--config", "-c"),
    subset: Optional[str] = typer.Option(None), split: Optional[str] = typer.Option(None),
    ids: Optional[str] = typer.Option(None, help="Comma-separated ids or a file (JSON list or one per line)."),
    limit: Optional[int] = typer.Option(None, min=1),
    scenarios: Optional[str] = typer.Option(None, help="gaia2: DIR | JSONL | tutorials | fixtures."),
    domain: Optional[str] = typer.Option(None, help="tau2: telecom | retail | airline | mock."),
    category: Optional[str] = typer.Option(None, help="bfcl: base | miss_func | …"),
    instances: Optional[str] = typer.Option(None, help="swebench: instances JSON/JSONL."),
    snapshot: Optional[str] = typer.Option(None, help="gaia: local snapshot dir (metadata.jsonl + files)."),
    hf: bool = typer.Option(False, help="Load the dataset from the hub (needs network)."),
    judge_model: Optional[str] = typer.Option(None),
    user_model: Optional[str] = typer.Option(None),
    trials: int = typer.Option(1, min=1), shard: str = typer.Option("0/1"),
    max_concurrency: int = typer.Option(1, min=1), retries: int = typer.Option(2, min=0),
    backend: str = typer.Option("local", help="local | ray"),
    ray_address: Optional[str] = typer.Option(None),
    global_steps: Optional[int] = typer.Option(None), worker_steps: Optional[int] = typer.Option(None),
    max_workers: Optional[int] = typer.Option(None), max_cost: Optional[float] = typer.Option(None),
    ablate: list[str] = typer.Option([]),
    faults: Optional[str] = typer.Option(None, help="Inject tool faults (same syntax as `porchestra run`)."),
    max_parallel: Optional[int] = typer.Option(None),
    base_url: Optional[str] = typer.Option(None), orchestrator_base_url: Optional[str] = typer.Option(None),
    worker_base_url: Optional[str] = typer.Option(None),
) -> None:
    """Evaluate a benchmark; resumable, with a live progress bar and a summary table."""
    # piped output (CI logs, files) gets a wide console: the summary table stays readable
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        if backend not in ("local", "ray"):
            raise BenchmarkError(f"--backend must be local or ray, got {backend!r}")
        cfg = build_config(config, env=bench, judge_model=judge_model, user_model=user_model,
                           **_common_overrides(mode, orchestrator_model, worker_model, global_steps, worker_steps,
                                               max_workers, max_cost, ablate, base_url, orchestrator_base_url,
                                               worker_base_url, faults, max_parallel))
        the_policy = policy or cfg.mode
        if policy is not None and policy not in ("gold", "gold-truncated"):
            raise BenchmarkError(f"--policy must be gold or gold-truncated, got {policy!r}")
        if policy is None:
            make_policy(cfg.mode)
        benchmark = load_benchmark(bench)
        options: dict[str, Any] = {**cfg.env_options, "subset": subset, "split": split, "ids": _read_ids(ids),
                                   "limit": limit, "scenarios": scenarios, "domain": domain, "category": category,
                                   "instances": instances, "snapshot": snapshot, "hf": hf, "policy": the_policy,
                                   "judge_model": cfg.judge_model, "user_model": cfg.user_model}
        options = {k: v for k, v in options.items() if v is not None}
        plan = EvalPlan(bench, options, cfg, the_policy, trials, _parse_shard(shard), max_concurrency, retries,
                        backend, {"ray_address": ray_address})
        benchmark.setup(options)
        tasks = select_tasks(benchmark.load_tasks(options), plan.shard)
    except USER_ERRORS as e:
        fail(str(e))
        return
    if not tasks:
        fail("no tasks selected (check --ids / --limit / --shard)")
    out = out or default_out(f"eval-{bench}")
    stats = {"done": 0, "ok": 0, "cost": 0.0, "cost_known": True}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task(f"{bench} · {the_policy}", total=0, status="")

        def on_row(row: dict[str, Any]) -> None:
            stats["done"] += 1
            stats["ok"] += bool(row.get("success"))
            if row.get("cost_usd") is None:
                stats["cost_known"] = False
            else:
                stats["cost"] += row["cost_usd"]
            cost = f"${stats['cost']:.4f}" + ("" if stats["cost_known"] else "+?")
            progress.update(bar, advance=1, status=f"success {stats['ok']}/{stats['done']} · cost {cost}")

        runner = EvalRunner(benchmark, plan, out, on_row=on_row)
        todo = runner.pending(tasks)
        progress.update(bar, total=len(todo))
        if len(todo) < len(tasks) * trials:
            console.print(f"resuming: {len(tasks) * trials - len(todo)} finished run(s) skipped")
        rows = runner.run(tasks)
    wanted = {t.id for t in tasks}
    write_summary(out, [r for r in rows if r["task_id"] in wanted], f"{bench} · {the_policy} · {runner.chash}",
                  console)
    console.print(f"results: {out / 'results.jsonl'}")
