"""The `porchestra` command line: run, eval, view, report, attribute, train, export.

Bad input (flags, config, model specs, task files) exits with code 2 and a message naming the
problem, before anything is written to the output directory.
"""

from __future__ import annotations

import importlib
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from .cli_support import env_help, mode_help
from .config import ConfigError, RunConfig, load_config
from .envs.benchmark import BenchmarkError
from .models.registry import ModelSpecError
from .policies import ModeError, make_policy

app = typer.Typer(no_args_is_help=True, add_completion=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Proactive Agentic Orchestration (POrchestra) and OPOD training. Exit codes: 0 done, "
                       "1 infrastructure failure, 2 bad input, 130 interrupted.")
err = Console(stderr=True, highlight=False)

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, ModelSpecError, ModeError, BenchmarkError, ValueError,
                                             FileNotFoundError)


def _user_errors() -> tuple[type[Exception], ...]:
    from .tools.sandbox import SandboxUnavailable  # no sandbox and no --allow-unisolated: a user error

    return USER_ERRORS + (SandboxUnavailable,)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _print_version(value: bool) -> None:
    if value:
        from .cli_support import version

        typer.echo(f"porchestra {version()}")
        raise typer.Exit(0)


@app.callback()
def _main(env_file: Optional[Path] = typer.Option(None, "--env-file", help="Load variables from this .env "
                                                  "file (default: ./.env when present); never overrides "
                                                  "variables already set."),
          _version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                        help="Print the version and exit.")) -> None:
    from dotenv import load_dotenv

    path = env_file or Path(".env")
    if env_file is not None and not env_file.is_file():
        fail(f"--env-file: file not found: {env_file}")
    if path.is_file():
        load_dotenv(path, override=False)


def build_config(config: Optional[Path], **overrides: Any) -> RunConfig:
    """Config file < CLI flags. Per-role base URLs become model_options entries."""
    from .envs.benchmark import parse_options

    cfg = load_config(config, {k: v for k, v in overrides.items() if not k.startswith("_")})
    from .config import ROLES, with_model_options

    # sampling / format flags reach every role (over the config file's per-role values), base URLs theirs
    flags = {k: v for k, v in overrides.get("_model_flags", {}).items() if v is not None}
    if flags:
        roles = {"default", *(r for r in cfg.model_options if r in ROLES)}
        cfg = with_model_options(cfg, {r: flags for r in sorted(roles)}, "model flags")
    options = parse_options(overrides.get("_options"))  # -O key=value: over the config's env_options
    if options:
        cfg = cfg.model_copy(update={"env_options": {**cfg.env_options, **options}})
    base_urls = {role: {"base_url": url} for role, url in overrides.get("_base_urls", {}).items() if url}
    return with_model_options(cfg, base_urls, "--base-url") if base_urls else cfg


def default_out(prefix: str) -> Path:
    return Path("runs") / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{prefix}"


def _common_overrides(mode, orchestrator_model, worker_model, global_steps, worker_steps, max_workers,
                      max_cost, ablate, base_url, orchestrator_base_url, worker_base_url, faults=None,
                      max_parallel=None, model_flags: dict[str, Any] | None = None) -> dict[str, Any]:
    if faults is not None:
        from .faults import parse_fault_spec

        try:
            faults = parse_fault_spec(faults)
        except ValueError as e:
            raise ConfigError(f"--faults: {e}") from None
    return {
        "faults": faults, "budgets.max_parallel": max_parallel,
        "mode": mode, "orchestrator_model": orchestrator_model, "worker_model": worker_model,
        "budgets.global_steps": global_steps, "budgets.worker_steps": worker_steps,
        "budgets.max_workers": max_workers, "budgets.max_cost_usd": max_cost,
        "ablate": list(ablate) or None,
        "_base_urls": {"orchestrator": orchestrator_base_url or base_url, "worker": worker_base_url or base_url,
                       "attributor": base_url, "judge": base_url, "user": base_url},
        "_model_flags": model_flags or {},
    }


@app.command()
def run(
    task: str = typer.Argument(..., help="The task text, @FILE (JSON/YAML task: id, instruction, metadata), "
                                          "or a task id of the chosen --env benchmark."),
    env: str = typer.Option("general", help=env_help()),
    orchestrator_model: Optional[str] = typer.Option(None, help="Model spec (default local:smollm2; --env testbed: local:porchestra-mini)."),
    worker_model: Optional[str] = typer.Option(None, help="Default worker model spec."),
    mode: Optional[str] = typer.Option(None, help=mode_help()),
    out: Optional[Path] = typer.Option(None, help="Output directory (default runs/<time>-run)."),
    workspace: Optional[Path] = typer.Option(None, help="general env: workspace directory (default: a temp dir)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config file."),
    global_steps: Optional[int] = typer.Option(None, help="Global step budget (all agent turns)."),
    worker_steps: Optional[int] = typer.Option(None, help="Default step budget per worker."),
    max_workers: Optional[int] = typer.Option(None, help="Most workers per task."),
    max_cost: Optional[float] = typer.Option(None, help="Stop when known cost (USD) exceeds this."),
    ablate: list[str] = typer.Option([], help="Turn off a revision dimension or protocol field (repeatable)."),
    faults: Optional[str] = typer.Option(None, help="Inject tool faults, e.g. 'revoke:search@first,"
                                                    "transient:fetch:0.3@calls=2' (see porchestra/faults.py)."),
    max_parallel: Optional[int] = typer.Option(None, help="Workers running at once (concurrent modes)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL for all roles."),
    orchestrator_base_url: Optional[str] = typer.Option(None, help="Base URL for the orchestrator only."),
    worker_base_url: Optional[str] = typer.Option(None, help="Base URL for the workers only."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature, all roles (default 0)."),
    max_tokens: Optional[int] = typer.Option(None, help="Reply length limit, all roles (default 1024 remote, 512 local)."),
    response_format: Optional[str] = typer.Option(None, help="Structured output for remote models: json_schema "
                                                  "(default), json_object or none (docs/models.md)."),
    answer: Optional[str] = typer.Option(None, help="general env: expected answer, to score the run."),
    allow_unisolated: bool = typer.Option(False, help="Run model-written code even without a sandbox."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not stream the trace (only the final lines)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show every LLM call."),
    log_level: Optional[str] = typer.Option(None, help="Python logging level on stderr: debug, info, "
                                                         "warning, error, critical (default: off)."),
    otlp_endpoint: Optional[str] = typer.Option(None, help="Also send OpenTelemetry spans live to this OTLP/HTTP "
                                                             "collector (e.g. http://localhost:4318); needs "
                                                             "porchestra[otel]."),
    option: list[str] = typer.Option([], "--option", "-O", help="Environment / benchmark option key=value "
                                     "(repeatable; the config's env_options)."),
) -> None:
    """Run one task and stream the interleaved orchestrator/worker trace. Exit 0 when the run completed
    (whatever its success), 1 on an infrastructure failure, 2 on bad input, 130 when interrupted."""
    from .cli_support import EXIT_INFRA, EXIT_INTERRUPTED, is_infra_reason, setup_logging
    from .console import ConsoleView
    from .run import build_models, run_task

    try:
        setup_logging(log_level)
        cfg = build_config(config, env=env, _options=option, **_common_overrides(
            mode, orchestrator_model, worker_model, global_steps, worker_steps, max_workers, max_cost, ablate,
            base_url, orchestrator_base_url, worker_base_url, faults, max_parallel,
            model_flags={"temperature": temperature, "max_tokens": max_tokens, "response_format": response_format}))
        policy = make_policy(cfg.mode)
        the_task, environment = _resolve_task(task, cfg, workspace, answer, allow_unisolated)
        models = build_models(cfg)
    except _user_errors() as e:
        fail(str(e))
        return
    out = out or default_out("run")
    try:  # run files inside the workspace could be read or forged by the code; a file as --out fails late
        from .integrity import check_run_paths, loaded_env_file

        check_run_paths(workspace or cfg.env_options.get("workspace"), out, config, loaded_env_file())
    except ConfigError as e:
        fail(str(e))
    if out.exists() and any(out.iterdir()):
        fail(f"--out: directory {out} is not empty")
    listeners: list[Any] = [] if quiet else [ConsoleView(verbose=verbose)]
    if otlp_endpoint:
        from .export.live import live_otlp_listener

        try:
            listeners.append(live_otlp_listener(otlp_endpoint))
        except RuntimeError as e:  # the optional exporter is not installed
            fail(str(e))
    try:
        result = run_task(the_task, environment, cfg, out_dir=out, models=models, policy=policy,
                          listeners=listeners)
    except KeyboardInterrupt:
        err.print(f"interrupted: the events so far are in {out / 'events.jsonl'}; rerun with a new --out to "
                  "start the task again")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        for x in listeners:
            getattr(x, "close", lambda: None)()
    Console(highlight=False).print(f"events: {result.events_path}")
    if is_infra_reason(result.reason):
        err.print(f"error: the run could not be completed: {result.reason}", markup=False)
        raise typer.Exit(EXIT_INFRA)


def _resolve_task(task: str, cfg: RunConfig, workspace: Optional[Path], answer: Optional[str],
                  allow_unisolated: bool):
    from .envs.base import Task

    if cfg.env == "general":
        from .envs.general import general_env_from_options

        if task.startswith("@"):
            the_task = _load_task_file(Path(task[1:]))
        else:
            if not task.strip():
                raise ValueError("TASK: the task text is empty")
            the_task = Task(id="task", instruction=task)
        if answer is not None:
            the_task.metadata["answer"] = answer
        env = general_env_from_options(cfg.env_options, workspace=workspace, allow_unisolated=allow_unisolated)
        return the_task, env
    from .api import benchmark_task

    return benchmark_task(task, cfg.env, cfg, field="TASK")


def _load_task_file(path: Path):
    from pydantic import ValidationError

    from .config import format_validation, read_yaml
    from .envs.general import strict_task

    data = read_yaml(path, "TASK: task file", fmt="JSON/YAML")
    try:
        return strict_task(data, f"TASK: task file {path}")  # unknown keys are refused, not dropped
    except ValidationError as e:
        raise ValueError(f"TASK: invalid task file {path}: {format_validation(e, root='task')}") from None


def _mount(module: str, attr: str, name: str, kind: str = "command") -> None:
    """Attach a sub-command implemented in another module (import errors surface when it is used)."""
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        why = str(e)  # `e` itself is unbound once the except block ends

        def missing(ctx: typer.Context) -> None:
            fail(f"'porchestra {name}' is unavailable: {why}", code=1)
        app.command(name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(missing)
        return
    if kind == "factory":  # a function building the sub-app when the CLI starts
        app.add_typer(obj(), name=name)
    elif kind == "typer":
        app.add_typer(obj, name=name)
    else:
        app.command(name)(obj)


def main(argv: list[str] | None = None) -> None:
    _register_subcommands()
    app(args=argv, prog_name="porchestra")


def _register_subcommands() -> None:
    for module, attr, name, kind in SUBCOMMANDS:
        _mount(module, attr, name, kind)


# (module, attribute, verb, kind). Each verb lives with the code it drives; heavy imports (torch,
# matplotlib) happen inside the commands, so mounting them keeps start-up fast.
SUBCOMMANDS: list[tuple[str, str, str, str]] = [
    ("porchestra.eval.cli", "eval_cmd", "eval", "command"),
    ("porchestra.viewer.cli", "view_cmd", "view", "command"),
    ("porchestra.report.cli", "report_cmd", "report", "command"),
    ("porchestra.cli_export", "build_export_app", "export", "factory"),
    ("porchestra.train.cli", "attribute_cmd", "attribute", "command"),
    ("porchestra.train.cli", "train_app", "train", "typer"),
    ("porchestra.reproduce.cli", "reproduce_cmd", "reproduce", "command"),
    ("porchestra.serve", "serve_cmd", "serve", "command"),
]


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
