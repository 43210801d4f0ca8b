"""Typer-compatible command for `porchestra view` (mounted by porchestra/cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def view_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory (or an eval directory, or an events.jsonl)")],
    html: Annotated[Optional[Path], typer.Option("--html", help="output file (default: RUN_DIR/view.html)")] = None,
) -> None:
    """Write a self-contained static HTML view of the interleaved orchestrator/worker stream."""
    from .html import write_view

    try:
        out = write_view(run_dir, html)
    except (FileNotFoundError, ValueError) as e:  # ValueError: a corrupt event line (file:line)
        raise typer.BadParameter(str(e)) from None
    typer.echo(f"wrote {out}")
