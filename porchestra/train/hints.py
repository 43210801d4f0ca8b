"""Hint insertion for the OPD teacher: H_t is placed into the decision context x_t at its hint slot.
The one implementation lives in :mod:`porchestra.prompting`, next to the templates that define the slot."""

from ..prompting import HINT_HEADER, insert_hint, render_hint_block

__all__ = ["HINT_HEADER", "insert_hint", "render_hint_block"]
