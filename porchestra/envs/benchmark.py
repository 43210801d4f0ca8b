"""A benchmark = a task loader + an Environment factory (+ the prompt set its Environment names).

Benchmarks are found by name through the `porchestra.benchmarks` entry-point group (see
pyproject.toml), or given as `module:attribute`; adding one touches no core file.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from .base import Environment, Task


class BenchmarkError(ValueError):
    """Bad benchmark options or data; the message names the offending option or file."""


class Benchmark:
    """Subclass and set `name`; override `load_tasks` and `make_env`.

    `options` is a plain dict of the CLI options of `porchestra eval` (subset, split, ids, limit,
    scenarios, domain, category, hf, ...) plus `env_options` from config; ignore what you don't use.
    """

    name: str = "base"
    description: str = ""

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        raise NotImplementedError

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        raise NotImplementedError

    def setup(self, options: dict[str, Any]) -> None:
        """One-time preparation before any task runs (e.g. create ARE's managed venv)."""

    def free_text_task(self, text: str, options: dict[str, Any]) -> Task | None:
        """A task from free text (`porchestra run "..." --env NAME`), for a benchmark whose environment
        can take one; None (the default): tasks are named by id only."""
        return None


def parse_options(items: list[str] | None) -> dict[str, Any]:
    """`-O key=value` flags → benchmark options (the CLI's form of config `env_options`). Values are
    read as YAML scalars: `-O limit=5` is 5, `-O hf=true` is True, `-O split=validation` a string."""
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BenchmarkError(f"-O/--option: expected key=value, got {item!r}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out[key.strip()] = raw if isinstance(value, (dict, list)) or value is None else value
    return out


def available_benchmarks() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="porchestra.benchmarks")}


def load_benchmark(name: str) -> Benchmark:
    target = available_benchmarks().get(name, name if ":" in name else None)
    if target is None:
        known = ", ".join(sorted(available_benchmarks())) or "none installed"
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {known} (or give module:attribute)")
    module, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise BenchmarkError(f"cannot load benchmark {name!r} from {target}: {e}") from None
    return obj() if isinstance(obj, type) else obj
