"""Control policies by name. Modes are found through the `porchestra.modes` entry-point group, so a
new baseline is a new module plus one entry-point line; `name:arg` passes an argument (polling:5)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .base import ControlPolicy
from .proactive import ProactivePolicy

BUILTIN = {"proactive": "porchestra.policies.proactive:ProactivePolicy",
           "porchestra": "porchestra.policies.proactive:ProactivePolicy"}


class ModeError(ValueError):
    pass


def available_modes() -> dict[str, str]:
    return {**BUILTIN, **{ep.name: ep.value for ep in entry_points(group="porchestra.modes")}}


def make_policy(mode: str) -> ControlPolicy:
    """A policy from a mode name (`proactive`, `polling:5`) or, like benchmarks, `module:attr[:arg]`."""
    name, _, arg = mode.partition(":")
    target = available_modes().get(name)
    if target is None and arg:  # module:attr[:arg] — a mode outside porchestra, no entry point needed
        attr, _, arg = arg.partition(":")
        target = f"{name}:{attr}"
        try:
            cls = getattr(importlib.import_module(name), attr)
        except (ImportError, AttributeError) as e:
            raise ModeError(f"unknown mode {mode!r} (not a known mode, and {target} cannot be loaded: {e}); "
                            f"known: {', '.join(sorted(available_modes()))}") from None
    elif target is None:
        raise ModeError(f"unknown mode {mode!r}; known: {', '.join(sorted(available_modes()))} (or module:attr)")
    else:
        module, _, attr = target.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    try:
        return cls(arg) if arg else cls()
    except (TypeError, ValueError) as e:
        raise ModeError(f"invalid mode {mode!r}: {e}") from None


__all__ = ["ControlPolicy", "ModeError", "ProactivePolicy", "available_modes", "make_policy"]
