"""Typer-compatible commands `porchestra export atif|otel RUN_DIR` (mounted by porchestra/cli.py;
`export records|sft` belong to the training exporters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..log.trajectory import find_event_logs


def _logs(run_dir: Path) -> list[Path]:
    try:
        return find_event_logs(run_dir)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e)) from None


def _out_for(p: Path, out: Optional[Path], suffix: str, many: bool) -> Path:
    if out is None:
        return p.parent / f"trajectory.{suffix}"
    return out / f"{p.parent.name}.{suffix}" if many else out


def export_atif_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory, an eval directory or an events.jsonl")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="file (one run) or directory (several)")] = None,
) -> None:
    """ATIF trajectory JSON (orchestrator trajectory with embedded worker sub-trajectories)."""
    from ..log.events import read_events
    from .atif import to_atif

    paths = _logs(run_dir)
    for p in paths:
        target = _out_for(p, out, "atif.json", len(paths) > 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(to_atif(read_events(p)), indent=1, ensure_ascii=False), encoding="utf-8")
        typer.echo(f"wrote {target}")


def export_otel_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory, an eval directory or an events.jsonl")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="file (one run) or directory (several)")] = None,
) -> None:
    """OpenTelemetry spans (GenAI semantic conventions) as JSON lines, one span per line."""
    from ..log.events import read_events
    from .otel import export_spans, spans_to_json

    paths = _logs(run_dir)
    for p in paths:
        try:
            spans = spans_to_json(export_spans(read_events(p)))
        except RuntimeError as e:
            raise typer.BadParameter(str(e)) from None
        target = _out_for(p, out, "otel.jsonl", len(paths) > 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in spans), encoding="utf-8")
        typer.echo(f"wrote {target} ({len(spans)} spans)")


def register(group: typer.Typer) -> None:
    """Add `atif` and `otel` to an existing `export` command group (shared with `records|sft`)."""
    group.command("atif")(export_atif_cmd)
    group.command("otel")(export_otel_cmd)
