"""One orchestrator decision from a policy's own template (offline planning): the same ask-until-valid
loop, validation, bounded correction and logging as every orchestrator decision
(:func:`porchestra.context.ask_until_valid`)."""

from __future__ import annotations

from typing import Any, Callable

from ..context import RunContext


def ask_with_template(rt: RunContext, template: str, variables: dict[str, Any], allowed: list[str],
                      validate: Callable[[Any], Any], component: str = "orchestration") -> tuple[Any, Any]:
    return rt.ask_with_template(template, variables, allowed, validate, component)
