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
) -> None:
    """Run every eval a paper table/figure needs (resumable), then write OUT/NAME.md and OUT/NAME.json."""
    from ..cli import build_config, fail
    from ..config import ConfigError
    from ..envs.benchmark import BenchmarkError
    from .runner import RecipeError, plan_lines, run_recipe

    recipe = RECIPES.get(name)
    if recipe is None:
        fail(f"NAME: unknown recipe {name!r}; known: {', '.join(RECIPES)}")
        return
    benches = tuple(bench) or None
    if dry_run:
        typer.echo("\n".join(plan_lines(recipe, out, benches)))
        return
    try:
        cfg = build_config(config)
        options = {"tasks": str(tasks_file) if tasks_file else None, "limit": limit, "trials": trials}
        path = run_recipe(recipe, cfg, out, options, benches,
                          on_step=lambda s: typer.echo(f"[{recipe.name}] {s.label}", err=True))
    except (RecipeError, ConfigError, BenchmarkError, ValueError) as e:
        fail(str(e))
        return
    typer.echo(str(path))
