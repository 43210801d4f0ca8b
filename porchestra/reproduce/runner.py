"""Running a recipe: its eval steps (resumable), then its table from the report builder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig
from ..envs.benchmark import load_benchmark
from ..eval.runner import EvalPlan, EvalRunner
from ..faults import parse_fault_spec
from ..report.build import build_report
from ..report.render import tables
from .recipes import Recipe, Step

SECTION_TITLES = {"by_category": "Success by benchmark category", "configs": "Configurations",
                  "ablations": "Ablations", "recovery": "Controlled intervention",
                  "by_length": "Success by task length", "by_dynamicity": "Success by number of future",
                  "pareto": "Success vs cost"}


class RecipeError(ValueError):
    """A recipe that cannot run as asked (the CLI exits 2)."""


def plan_lines(recipe: Recipe, out: Path, benches: tuple[str, ...] | None = None, cfg: RunConfig | None = None,
               topts: Any = None) -> list[str]:
    lines = [f"# {recipe.name}: {recipe.paper}"]
    if recipe.kind == "training":
        from .training import TrainPlan, TrainOptions, plan_training

        for b in benches or recipe.benches:
            plan = TrainPlan(recipe.name, b, cfg or RunConfig(), out, topts or TrainOptions())
            for cmd, marker in plan_training(plan):
                lines.append(f"  {cmd}" + ("   [done]" if marker.exists() else ""))
        lines.append(f"  → {out / (recipe.name + '.md')} ({', '.join(recipe.sections)})")
        return lines
    for s in recipe.steps(benches):
        flags = [f"--mode {s.mode}"] + [f"--ablate {a}" for a in s.ablate] + ([f"--faults '{s.faults}'"] if s.faults else [])
        done = (out / "runs" / s.label / "results.jsonl").is_file()
        lines.append(f"  eval {s.bench} {' '.join(flags)} --out {out / 'runs' / s.label}" + ("   [has results: resumes]" if done else ""))
    lines.append(f"  → {out / (recipe.name + '.md')} ({', '.join(recipe.sections)})")
    return lines


def step_config(cfg: RunConfig, s: Step) -> RunConfig:
    return cfg.model_copy(update={"env": s.bench, "mode": s.mode, "ablate": list(s.ablate),
                                  "faults": parse_fault_spec(s.faults) if s.faults else []})


def run_step(cfg: RunConfig, s: Step, out: Path, options: dict[str, Any], tag: str = "") -> Path:
    bench = load_benchmark(s.bench)
    opts = {**cfg.env_options, **options, "policy": s.mode, "judge_model": cfg.judge_model,
            "user_model": cfg.user_model}
    opts = {k: v for k, v in opts.items() if v is not None}
    c = step_config(cfg, s)
    bench.setup(opts)
    tasks = bench.load_tasks(opts)
    if not tasks:
        raise RecipeError(f"step {s.label}: no tasks selected")
    d = out / "runs" / (s.label + (f"__{tag}" if tag else ""))
    trials = int(opts.pop("trials", None) or 1)
    EvalRunner(bench, EvalPlan(s.bench, opts, c, s.mode, trials=trials), d).run(tasks)
    return d


def markdown_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    out = [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def write_table(recipe: Recipe, run_dirs: list[Path], out: Path, labels: list[str] | None = None) -> Path:
    report = build_report(run_dirs, labels=labels or [d.name for d in run_dirs])
    parts = [f"# {recipe.paper}", "", f"Recipe `{recipe.name}`; runs under {out / 'runs'}.", ""]
    by_title = tables(report)
    for section in recipe.sections:
        prefix = SECTION_TITLES[section]
        for title, header, rows in by_title:
            if title.startswith(prefix):
                parts.append(markdown_table(title, header, rows))
    path = out / f"{recipe.name}.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    (out / f"{recipe.name}.json").write_text(json.dumps(
        {k: report[k] for k in ("configs", *[s for s in recipe.sections if s != "configs"]) if k in report},
        indent=1, default=str), encoding="utf-8")
    return path


def run_training_recipe(recipe: Recipe, cfg: RunConfig, out: Path, options: dict[str, Any], benches: tuple[str, ...],
                        topts: Any, say: Callable[[str], None] | None) -> Path:
    from .training import TrainPlan, run_training

    dirs, labels = [], []
    for b in benches:
        def run_eval(c: RunConfig, tag: str, extra: dict[str, Any], b: str = b) -> Path:
            return run_step(c, Step(b, "proactive"), out, {**options, **extra}, tag=tag)

        for arm, d in run_training(TrainPlan(recipe.name, b, cfg, out, topts), run_eval, say):
            dirs.append(d)
            labels.append(f"{b}: {arm.row}")
    return write_table(recipe, dirs, out, labels)


def run_recipe(recipe: Recipe, cfg: RunConfig, out: Path, options: dict[str, Any] | None = None,
               benches: tuple[str, ...] | None = None, on_step: Callable[[Step], None] | None = None,
               topts: Any = None, say: Callable[[str], None] | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if recipe.kind == "training":
        from .training import TrainOptions

        return run_training_recipe(recipe, cfg, out, options or {}, benches or recipe.benches,
                                   topts or TrainOptions(), say)
    dirs = []
    for s in recipe.steps(benches):
        if on_step:
            on_step(s)
        dirs.append(run_step(cfg, s, out, options or {}))
    return write_table(recipe, dirs, out)
