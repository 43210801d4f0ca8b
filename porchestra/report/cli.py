"""Typer-compatible command for `porchestra report` (mounted by porchestra/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer


FIGURE_TITLES = {"pareto": "Success vs cost", "recovery": "Recovery after an injected fault",
                 "by_length": "Success by task length", "by_dynamicity": "Success by number of future events"}


def _figures_markdown(files: list[Path], out: Path) -> str:
    """report.md embeds each PNG (relative path, so the directory can be moved) and links its SVG."""
    lines = ["## Figures", ""]
    for f in files:
        if f.suffix == ".png":
            title = FIGURE_TITLES.get(f.stem, f.stem)
            lines += [f"### {title}", "", f"![{title}]({f.relative_to(out).as_posix()})", "",
                      f"[SVG]({f.with_suffix('.svg').relative_to(out).as_posix()})", ""]
    return "\n".join(lines)


def write_report(run_dirs: list[Path], out: Path, labels: list[str] | None = None, plots: bool = True) -> dict:
    from .build import build_report
    from .render import markdown

    report = build_report(run_dirs, labels)
    out.mkdir(parents=True, exist_ok=True)
    figures: list[Path] = []
    if plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            report["notes"] = ["plots skipped: matplotlib is not installed (pip install 'porchestra[plots]')"]
            plots = False
    if plots:
        from ..analysis import plots as P

        figures += P.plot_pareto(report["pareto"], out)
        curves = {r["label"]: r["km_curve"] for r in report["recovery"]}
        if curves:
            figures += P.plot_recovery(curves, out)
        if any(report["by_length"].values()):
            figures += P.plot_groups(report["by_length"], out, "by_length", "fewest environment actions")
        if any(report["by_dynamicity"].values()):
            figures += P.plot_groups(report["by_dynamicity"], out, "by_dynamicity", "future events")
    text = markdown(report)
    if figures:
        text = text.rstrip("\n") + "\n\n" + _figures_markdown(figures, out)
    (out / "report.md").write_text(text, encoding="utf-8")
    report["files"] = [str(f) for f in [out / "report.json", out / "report.md", *figures]]
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
