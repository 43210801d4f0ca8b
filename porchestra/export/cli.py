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
    fmt: Annotated[str, typer.Option("--format", help="otlp: OTLP/JSON ExportTraceServiceRequest "
                                                      "(trajectory.otlp.json); jsonl: the SDK's JSON, one span "
                                                      "per line (trajectory.otel.jsonl)")] = "otlp",
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", help="also send the spans to this OTLP/HTTP "
                                                                       "collector (e.g. http://localhost:4318)")] = None,
) -> None:
    """OpenTelemetry spans (GenAI semantic conventions) of each run, as OTLP/JSON; optionally sent to a
    collector."""
    from ..log.events import read_events
    from .otel import export_spans, send_spans, spans_to_json, to_otlp_json

    if fmt not in ("otlp", "jsonl"):
        raise typer.BadParameter(f"--format must be otlp or jsonl, got {fmt!r}")
    paths = _logs(run_dir)
    for p in paths:
        try:
            spans = export_spans(read_events(p))
        except RuntimeError as e:
            raise typer.BadParameter(str(e)) from None
        if fmt == "otlp":
            target = _out_for(p, out, "otlp.json", len(paths) > 1)
            text = json.dumps(to_otlp_json(spans), ensure_ascii=False) + "\n"
        else:
            target = _out_for(p, out, "otel.jsonl", len(paths) > 1)
            text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in spans_to_json(spans))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {target} ({len(spans)} spans)")
        if endpoint:
            try:
                send_spans(spans, endpoint)
            except RuntimeError as e:
                typer.echo(f"error: {e}", err=True)
                raise typer.Exit(1) from None
            typer.echo(f"sent {len(spans)} spans to {endpoint}")


def register(group: typer.Typer) -> None:
    """Add `atif` and `otel` to an existing `export` command group (shared with `records|sft`)."""
    group.command("atif")(export_atif_cmd)
    group.command("otel")(export_otel_cmd)
