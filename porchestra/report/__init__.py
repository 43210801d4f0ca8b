"""`porchestra report RUN_DIR…`: tables, Markdown/JSON and plots from recorded runs."""

from .build import build_report

__all__ = ["build_report"]
