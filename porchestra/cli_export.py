"""`porchestra export …`: one group for every exporter that reads event logs — decision records and
SFT data (training side), ATIF trajectories and OpenTelemetry spans (analysis side)."""

from __future__ import annotations

import typer


def build_export_app() -> typer.Typer:
    """A fresh group holding both sides' exporters (nothing is mutated at import time)."""
    from .export.cli import register
    from .train.cli import export_app as training_exports

    app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                      help="Export decision records, SFT data, ATIF trajectories or OpenTelemetry spans.")
    app.registered_commands.extend(training_exports.registered_commands)
    register(app)
    return app
