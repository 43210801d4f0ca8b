"""Prompt templates (Jinja2 files under porchestra/prompts/<set>/) and the OPOD hint slot.

A prompt set may hold only the templates it changes; missing ones fall back to the `general` set.
The orchestrator's user template marks where the self-teacher's hint H_t goes with `{{ hint_slot }}`;
at inference the marker is removed and its position recorded in the `llm_call` event, so training can
insert the hint into the exact rendered context (:func:`insert_hint`).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).parent / "prompts"
HINT_MARKER = "\u2063HINT_SLOT\u2063"  # invisible separators: never produced by normal text
HINT_HEADER = "Hint / Instruction:"


def render_hint_block(hint: str) -> str:
    return f"\n{HINT_HEADER}\n{hint.strip()}\n"


def insert_hint(messages: list[dict[str, Any]], slot: dict[str, int], hint: str) -> list[dict[str, Any]]:
    """A copy of `messages` with the hint block inserted at `slot` (the self-teacher's context)."""
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


def _dir_for(prompt_set: str) -> Path:
    p = Path(prompt_set)
    return p if p.is_absolute() else PROMPTS_DIR / prompt_set


@lru_cache(maxsize=32)
def _environment(prompt_set: str, first: tuple[str, ...] = ()) -> jinja2.Environment:
    dirs = [*first, str(_dir_for(prompt_set))]
    if prompt_set != "general":
        dirs.append(str(PROMPTS_DIR / "general"))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(dirs), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                             autoescape=False)
    env.filters["tojson_compact"] = lambda v: __import__("json").dumps(v, ensure_ascii=False)
    return env


class PromptSet:
    def __init__(self, name: str = "general", first: tuple[str | Path, ...] = ()):
        """`first`: directories searched before the set (a mode's own templates)."""
        if not _dir_for(name).is_dir():
            raise ValueError(f"prompt set {name!r} not found under {PROMPTS_DIR}")
        for d in first:
            if not Path(d).is_dir():
                raise ValueError(f"prompt directory {d} not found")
        self.name = name
        self.env = _environment(name, tuple(str(d) for d in first))

    def render(self, template: str, **variables: Any) -> str:
        return self.env.get_template(template).render(**variables).strip()

    def has(self, template: str) -> bool:
        try:
            self.env.get_template(template)
            return True
        except jinja2.TemplateNotFound:
            return False

    def orchestrator_messages(self, **variables: Any) -> tuple[list[dict[str, str]], dict[str, int] | None]:
        """[system, user] messages for one orchestrator decision, and the hint slot position."""
        system = self.render("orchestrator_system.j2", **variables)
        user = self.render("orchestrator_user.j2", hint_slot=HINT_MARKER, **variables)
        slot = None
        k = user.find(HINT_MARKER)
        if k >= 0:
            user = user.replace(HINT_MARKER, "", 1)
            slot = {"message_index": 1, "offset": k}
        return [{"role": "system", "content": system}, {"role": "user", "content": user}], slot
