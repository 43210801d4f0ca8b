"""Hint insertion for the OPD teacher: H_t is placed into the decision context x_t at its hint slot.

The canonical implementation is :mod:`porchestra.prompting` (owned by the prompt layer). This module
re-exports it when present and otherwise provides the same behaviour, so training never depends on
import order between parts of the project.
"""

from __future__ import annotations

import copy
from typing import Any

try:  # the prompt layer's version wins when it exists
    from porchestra.prompting import HINT_HEADER, insert_hint, render_hint_block  # type: ignore
except ImportError:  # pragma: no cover - exercised only before porchestra/prompting.py lands
    HINT_HEADER = "## Hindsight feedback on this decision"

    def render_hint_block(hint: str) -> str:
        """The text inserted into the context: a header and the hint, set off by blank lines."""
        return f"\n\n{HINT_HEADER}\n{hint.strip()}\n\n"

    def insert_hint(messages: list[dict[str, Any]], slot: dict[str, int], hint: str) -> list[dict[str, Any]]:
        """A copy of `messages` with the hint block inserted at
        messages[slot["message_index"]]["content"][slot["offset"]]."""
        out = copy.deepcopy(messages)
        i, k = int(slot["message_index"]), int(slot["offset"])
        if not 0 <= i < len(out):
            raise ValueError(f"hint_slot.message_index {i} out of range for {len(out)} messages")
        content = out[i].get("content") or ""
        if not isinstance(content, str):
            raise ValueError(f"hint_slot points at message {i} whose content is not text")
        if not 0 <= k <= len(content):
            raise ValueError(f"hint_slot.offset {k} out of range for a message of {len(content)} chars")
        out[i]["content"] = content[:k] + render_hint_block(hint) + content[k:]
        return out


def default_slot(messages: list[dict[str, Any]]) -> dict[str, int]:
    """Where the hint goes when a record carries no slot: the end of the last user message."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return {"message_index": i, "offset": len(messages[i].get("content") or "")}
    return {"message_index": len(messages) - 1, "offset": len(messages[-1].get("content") or "")}


def with_hint(messages: list[dict[str, Any]], slot: dict[str, int] | None, hint: str) -> list[dict[str, Any]]:
    return insert_hint(messages, slot or default_slot(messages), hint)


__all__ = ["HINT_HEADER", "default_slot", "insert_hint", "render_hint_block", "with_hint"]
