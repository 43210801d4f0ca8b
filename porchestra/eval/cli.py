"""`porchestra eval BENCH …` — mounted on the main CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from ..cli import USER_ERRORS, _common_overrides, build_config, default_out, fail
from ..cli_support import EXIT_INTERRUPTED, eval_exit_code, mode_help, setup_logging
from ..envs.benchmark import BenchmarkError, check_options, load_benchmark
from ..policies import make_policy
from .display import EvalDisplay
from .lock import EvalDirBusy
from .results import disk_error
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
    mode: Optional[str] = typer.Option(None, help=mode_help()),
    policy: Optional[str] = typer.Option(None, help="'gold' / 'gold-truncated' replays reference actions (no LLM)."),
    orchestrator_model: Optional[str] = typer.Option(None, help="Orchestrator model spec (default local:smollm2; testbed: local:porchestra-mini)."),
    worker_model: Optional[str] = typer.Option(None, help="Default worker model spec."),
    out: Optional[Path] = typer.Option(None, help="Eval directory; rerun the same command to resume."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config file (flags override it)."),
    tasks_file: Optional[Path] = typer.Option(None, "--tasks", help="general: task file (JSON list or JSONL of "
                                                                   "{id, instruction, metadata})."),
    subset: Optional[str] = typer.Option(None, help="gaia2 --hf: hub config (default mini); tau2: same as --split."),
    split: Optional[str] = typer.Option(None, help="gaia / gaia2 --hf: validation (default) | test; swebench --hf: test; tau2: a split of the domain (default base)."),
    ids: Optional[str] = typer.Option(None, help="Comma-separated ids or a file (JSON list or one per line)."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many tasks (after --ids)."),
    scenarios: Optional[str] = typer.Option(None, help="gaia2: DIR | JSONL | tutorials | fixtures."),
    domain: Optional[str] = typer.Option(None, help="tau2: telecom | retail | airline."),
    category: Optional[str] = typer.Option(None, help="bfcl: base | miss_func | miss_param | long_context."),
    instances: Optional[str] = typer.Option(None, help="swebench: instances JSON/JSONL, or fixtures."),
    snapshot: Optional[str] = typer.Option(None, help="gaia: local snapshot dir (metadata.jsonl + files), or fixtures."),
    hf: bool = typer.Option(False, help="Load the dataset from the hub (needs network)."),
    judge_model: Optional[str] = typer.Option(None, help="Model spec for LLM judges (gaia2 LLM checks)."),
    user_model: Optional[str] = typer.Option(None, help="Model spec of the simulated user (tau2)."),
    trials: int = typer.Option(1, min=1, help="Runs per task."),
    shard: str = typer.Option("0/1", help="Run shard i of N (i/N) of the sorted task ids."),
    max_concurrency: int = typer.Option(1, min=1, help="(task, trial) runs at once."),
    retries: int = typer.Option(2, min=0, help="Retries of a run that hit an infrastructure error."),
    backend: str = typer.Option("local", help="local | ray"),
    ray_address: Optional[str] = typer.Option(None, help="ray backend: cluster address (default: start locally)."),
    global_steps: Optional[int] = typer.Option(None, help="Global step budget per task (all agent turns)."),
    worker_steps: Optional[int] = typer.Option(None, help="Default step budget per worker."),
    max_workers: Optional[int] = typer.Option(None, help="Most workers per task."),
    max_cost: Optional[float] = typer.Option(None, help="Stop a task when its known cost (USD) exceeds this."),
    ablate: list[str] = typer.Option([], help="Turn off a revision dimension or protocol field (repeatable)."),
    faults: Optional[str] = typer.Option(None, help="Inject tool faults (same syntax as `porchestra run`)."),
    max_parallel: Optional[int] = typer.Option(None, help="Workers running at once (concurrent modes)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL for all roles."),
    orchestrator_base_url: Optional[str] = typer.Option(None, help="Base URL for the orchestrator only."),
    worker_base_url: Optional[str] = typer.Option(None, help="Base URL for the workers only."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature, all roles (default 0)."),
    max_tokens: Optional[int] = typer.Option(None, help="Reply length limit, all roles (default 1024 remote, 512 local)."),
    response_format: Optional[str] = typer.Option(None, help="Structured output for remote models: json_schema "
                                                  "(default), json_object or none (docs/models.md)."),
    keep_infra: bool = typer.Option(False, help="On resume, keep rows that ended on an infrastructure error "
                                               "(default: run them again)."),
    option: list[str] = typer.Option([], "--option", "-O", help="Benchmark option key=value (repeatable; the config's "
                                     "env_options; --subset/--split/--scenarios/... are aliases)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display; only the summary."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print one line per finished task."),
    log_level: Optional[str] = typer.Option(None, help="Python logging level on stderr: debug, info, warning, "
                                                         "error, critical (default: off)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout (everything else "
                                                        "goes to stderr)."),
    otlp_endpoint: Optional[str] = typer.Option(None, help="Also send each run's OpenTelemetry spans live to this "
                                                             "OTLP/HTTP collector (needs porchestra[otel])."),
) -> None:
    """Evaluate a benchmark; resumable, with a live progress bar and a summary table. Exit 0 when every
    (task, trial) completed, 1 when some could not because of infrastructure, 2 on bad input, 130 when
    interrupted (rerun the same command to resume)."""
    # piped output (CI logs, files) gets a wide console: the summary table stays readable
    stream = sys.stderr if json_out else sys.stdout
    console = Console(highlight=False, file=stream, width=None if stream.isatty() else 160)
    try:
        setup_logging(log_level)
        if backend not in ("local", "ray"):
            raise BenchmarkError(f"--backend must be local or ray, got {backend!r}")
        cfg = build_config(config, env=bench, judge_model=judge_model, user_model=user_model, _options=option,
                           **_common_overrides(mode, orchestrator_model, worker_model, global_steps, worker_steps,
                                               max_workers, max_cost, ablate, base_url, orchestrator_base_url,
                                               worker_base_url, faults, max_parallel,
                                               model_flags={"temperature": temperature, "max_tokens": max_tokens,
                                                            "response_format": response_format}))
        the_policy = policy or cfg.mode
        if policy is not None and policy not in ("gold", "gold-truncated"):
            raise BenchmarkError(f"--policy must be gold or gold-truncated, got {policy!r}")
        if policy is None:
            make_policy(cfg.mode)
        benchmark = load_benchmark(bench)
        flags: dict[str, Any] = {"subset": subset, "split": split, "ids": _read_ids(ids),
                                 "limit": limit, "scenarios": scenarios, "domain": domain, "category": category,
                                 "instances": instances, "snapshot": snapshot, "hf": hf or None, "policy": the_policy,
                                 "judge_model": cfg.judge_model, "user_model": cfg.user_model,
                                 "tasks": str(tasks_file) if tasks_file else None}
        # an alias flag that was not given must not erase the same key from -O / env_options
        given = {k: v for k, v in flags.items() if v is not None}
        options = {k: v for k, v in {**cfg.env_options, **given}.items() if v is not None}
        check_options(benchmark, options)  # a misspelled option is named before anything runs
        plan = EvalPlan(bench, options, cfg, the_policy, trials, _parse_shard(shard), max_concurrency, retries,
                        backend, {"ray_address": ray_address}, keep_infra=keep_infra)
        if otlp_endpoint:  # one live exporter per (task, trial): concurrent runs are separate traces
            from ..export.live import live_otlp_listener

            try:
                live_otlp_listener(otlp_endpoint)
            except RuntimeError as e:  # the optional exporter is not installed
                raise BenchmarkError(f"--otlp-endpoint: {e}") from None
            plan.extra["listeners"] = lambda task, trial: [live_otlp_listener(otlp_endpoint)]
        benchmark.setup(options)
        tasks = select_tasks(benchmark.load_tasks(options), plan.shard)
    except USER_ERRORS as e:
        fail(str(e))
        return
    if not tasks:
        fail("no tasks selected (check --ids / --limit / --shard)")
    out = out or default_out(f"eval-{bench}")
    try:  # a file or a read-only place as --out: refused before any task runs
        from ..integrity import check_writable_dir

        check_writable_dir(out, "--out")
    except ValueError as e:
        fail(str(e))
    display = EvalDisplay(console, f"{bench} · {the_policy}", quiet=quiet, verbose=verbose)
    try:
        with display:
            runner = EvalRunner(benchmark, plan, out, on_row=display.on_row, on_start=display.on_start)
            todo = runner.pending(tasks)
            display.set_total(len(todo))
            if len(todo) < len(tasks) * trials:
                display.note(f"resuming: {len(tasks) * trials - len(todo)} finished run(s) skipped")
            rows = runner.run(tasks)
    except EvalDirBusy as e:  # another eval writes this --out: nothing was run or written
        fail(str(e))
        return
    except OSError as e:
        if disk_error(e) is None:
            raise
        fail(f"the eval directory {out} cannot take more data ({disk_error(e)}); results.jsonl holds every "
             "finished run intact: free space and rerun the same command to resume")
        return
    except KeyboardInterrupt:
        console.print(f"interrupted: finished runs are kept in {out / 'results.jsonl'}; run the same command "
                      "again to resume", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    wanted = {t.id for t in tasks}
    rows = [r for r in rows if r["task_id"] in wanted]
    summary = write_summary(out, rows, f"{bench} · {the_policy} · {runner.chash}", console)
    console.print(f"results: {out / 'results.jsonl'}", markup=False)
    code = eval_exit_code(rows)
    if json_out:
        typer.echo(json.dumps({"out": str(out), "config_hash": runner.chash, "exit_code": code, **summary},
                              ensure_ascii=False))
    if code:
        n = sum(1 for r in rows if r.get("infra_error"))
        console.print(f"error: {n} of {len(rows)} run(s) could not be completed because of infrastructure errors "
                      f"(see infra_error rows in results.jsonl); rerun the same command to retry them", markup=False)
        raise typer.Exit(code)
