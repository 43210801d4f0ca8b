"""Typer-compatible command for `porchestra report` (mounted by porchestra/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer


def write_report(run_dirs: list[Path], out: Path, labels: list[str] | None = None, plots: bool = True) -> dict:
    from .build import build_report
    from .render import markdown

    report = build_report(run_dirs, labels)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    files = [out / "report.json", out / "report.md"]
    if plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            report["notes"] = ["plots skipped: matplotlib is not installed (pip install 'porchestra[plots]')"]
            plots = False
    if plots:
        from ..analysis import plots as P

        files += P.plot_pareto(report["pareto"], out)
        curves = {r["label"]: r["km_curve"] for r in report["recovery"]}
        if curves:
            files += P.plot_recovery(curves, out)
        if any(report["by_length"].values()):
            files += P.plot_groups(report["by_length"], out, "by_length", "fewest environment actions")
        if any(report["by_dynamicity"].values()):
            files += P.plot_groups(report["by_dynamicity"], out, "by_dynamicity", "future events")
    report["files"] = [str(f) for f in files]
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return report


def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="run or eval directories; each one is a configuration")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="output directory (default: FIRST_RUN_DIR/report)")] = None,
    label: Annotated[Optional[list[str]], typer.Option("--label", help="a name per RUN_DIR, in order")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="write PNG and SVG figures")] = True,
) -> None:
    """Tables (success, cost split, recovery/delay, ablations, task-length groups, Pareto) printed and
    written as report.md / report.json, with plots as PNG and SVG."""
    from .render import print_rich

    try:
        report = write_report(run_dirs, out or (run_dirs[0] / "report"), label, plots)
    except (FileNotFoundError, ValueError) as e:  # ValueError: a corrupt event line (file:line)
        raise typer.BadParameter(str(e)) from None
    print_rich(report)
    for note in report.get("notes", []):
        typer.echo(note)
    typer.echo("wrote: " + ", ".join(report["files"]))
