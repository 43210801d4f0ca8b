"""POrchestra: workers hand control back whenever they choose to (finish / revise / stop)."""

from __future__ import annotations

from .base import ControlPolicy


class ProactivePolicy(ControlPolicy):
    name = "proactive"
