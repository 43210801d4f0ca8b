"""`porchestra view RUN_DIR`: a self-contained static HTML view of a run's event log."""

from .html import render_view, write_view

__all__ = ["render_view", "write_view"]
