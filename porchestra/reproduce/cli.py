"""`porchestra reproduce NAME`: run a paper table/figure's recipe (or print its plan)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .recipes import RECIPES


def reproduce_cmd(
    name: str = typer.Argument(..., help=f"One of: {', '.join(RECIPES)}."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with the model endpoints."),
    out: Path = typer.Option(Path("reproduce"), help="Output directory (runs/ and the tables); rerun to resume."),
    bench: list[str] = typer.Option([], help="Run on these benchmarks instead of the paper's (repeatable)."),
    tasks_file: Optional[Path] = typer.Option(None, "--tasks", help="general benchmark: task file."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many tasks per step."),
    trials: int = typer.Option(1, min=1, help="Runs per task (the paper averages some settings over two)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; run nothing."),
    base_model: str = typer.Option("local:smollm2", "--base-model",
                                   help="Training recipes: SFT starts from these weights (paper: Qwen3.5-9B)."),
    train_args: str = typer.Option("", "--train-args", help="Training recipes: extra flags for every "
                                   "`porchestra train` call, e.g. '--epochs 2 --bf16 --lora-r 32'."),
    opod_args: str = typer.Option("", "--opod-args", help="Training recipes: extra flags for the `train opod` "
                                  "calls only, e.g. '--max-new-tokens 512 --sampler server --sampler-url URL'."),
    train_tasks: Optional[Path] = typer.Option(None, "--train-tasks",
                                               help="Training recipes, general benchmark: the collection task file."),
    train_env: list[str] = typer.Option([], "--train-env", help="Training recipes: KEY=VALUE env_options of the "
                                        "collection runs (the training split, e.g. paper_split=train); repeatable."),
    policy_model: Optional[str] = typer.Option(None, "--policy-model", help="Training recipes: the SFT checkpoint "
                                               "as served (e.g. openai:sft on vLLM) for the on-policy collection; "
                                               "default local:OUT/train/BENCH/sft/final."),
    policy_base_url: Optional[str] = typer.Option(None, "--policy-base-url", help="Endpoint of --policy-model."),
) -> None:
    """Run every eval (and, for table2/lambda/divergence, training) step a paper table/figure needs
    (resumable), then write OUT/NAME.md and OUT/NAME.json."""
    from ..cli import build_config, fail
    from ..config import ConfigError
    from ..envs.benchmark import BenchmarkError
    from .runner import RecipeError, plan_lines, run_recipe

    recipe = RECIPES.get(name)
    if recipe is None:
        fail(f"NAME: unknown recipe {name!r}; known: {', '.join(RECIPES)}")
        return
    import shlex

    from .training import TrainOptions

    benches = tuple(bench) or None
    env: dict[str, object] = {}
    for kv in train_env:
        if "=" not in kv:
            fail(f"--train-env: {kv!r} is not KEY=VALUE")
        k, v = kv.split("=", 1)
        env[k] = {"true": True, "false": False}.get(v.lower(), v)
    topts = TrainOptions(base_model=base_model, train_args=tuple(shlex.split(train_args)),
                         opod_args=tuple(shlex.split(opod_args)), train_env=env,
                         train_tasks=str(train_tasks) if train_tasks else None, policy_model=policy_model,
                         policy_base_url=policy_base_url)
    try:
        cfg = build_config(config)
        if dry_run:
            typer.echo("\n".join(plan_lines(recipe, out, benches, cfg, topts)))
            return
        options = {"tasks": str(tasks_file) if tasks_file else None, "limit": limit, "trials": trials}
        path = run_recipe(recipe, cfg, out, options, benches,
                          on_step=lambda s: typer.echo(f"[{recipe.name}] {s.label}", err=True), topts=topts,
                          say=lambda s: typer.echo(f"[{recipe.name}] {s}", err=True))
    except (RecipeError, ConfigError, BenchmarkError, ValueError) as e:
        fail(str(e))
        return
    typer.echo(str(path))
