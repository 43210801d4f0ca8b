"""`porchestra export …`: one group for every exporter that reads event logs — decision records and
SFT data (training side), ATIF trajectories and OpenTelemetry spans (analysis side)."""

from __future__ import annotations

from .export.cli import register
from .train.cli import export_app

register(export_app)

__all__ = ["export_app"]
