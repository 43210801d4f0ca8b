"""Hint insertion for the OPD teacher: H_t is placed into the decision context x_t at its hint slot.
The insertion itself lives in :mod:`porchestra.prompting`, next to the templates that define the slot."""

from __future__ import annotations

from typing import Any

from ..prompting import HINT_HEADER, insert_hint, render_hint_block


def default_slot(messages: list[dict[str, Any]]) -> dict[str, int]:
    """Where the hint goes when a record carries no slot: the end of the last user message."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return {"message_index": i, "offset": len(messages[i].get("content") or "")}
    return {"message_index": len(messages) - 1, "offset": len(messages[-1].get("content") or "")}


def with_hint(messages: list[dict[str, Any]], slot: dict[str, int] | None, hint: str) -> list[dict[str, Any]]:
    return insert_hint(messages, slot or default_slot(messages), hint)


__all__ = ["HINT_HEADER", "default_slot", "insert_hint", "render_hint_block", "with_hint"]
