"""A benchmark = a task loader + an Environment factory (+ the prompt set its Environment names).

Benchmarks are found by name through the `porchestra.benchmarks` entry-point group (see
pyproject.toml), or given as `module:attribute`; adding one touches no core file.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .base import Environment, Task


class BenchmarkError(ValueError):
    """Bad benchmark options or data; the message names the offending option or file."""


class BenchmarkOptions(BaseModel):
    """The option names a benchmark takes. Subclass it per benchmark, adding a field per option (its
    default is what the benchmark does without it), and set `Benchmark.Options`: an option a
    benchmark does not declare is then an error naming it (a misspelled `-O` or `env_options` key
    must never be silently ignored). The fields here are the ones porchestra itself passes to
    every benchmark."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    ids: Any = None  # a list, a comma-separated string or a file of ids
    limit: Any = None
    policy: Any = None  # the mode (or gold / gold-truncated) the eval runs
    judge_model: Any = None  # model specs or Model objects
    user_model: Any = None
    shard: Any = None
    env_options: Any = None  # a nested copy of the config's env_options (older callers)


class Benchmark:
    """Subclass and set `name`; override `load_tasks` and `make_env`; declare the option names in
    `Options` (a BenchmarkOptions subclass).

    `options` is a plain dict of the CLI options of `porchestra eval` (subset, split, ids, limit,
    scenarios, domain, category, hf, ...) plus `env_options` from config. Every entry point checks
    it against `Options` first (:func:`check_options`); a benchmark without `Options` (a plugin
    written before it existed) gets its options unchecked.
    """

    name: str = "base"
    description: str = ""
    Options: ClassVar[type[BenchmarkOptions] | None] = None

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


def check_options(bench: Benchmark, options: dict[str, Any]) -> None:
    """Refuse options `bench` does not declare (exit 2 at the CLI), naming them and the known ones.
    The one place every entry point (eval, run, porchestra.run / evaluate, reproduce) validates."""
    model = getattr(bench, "Options", None)
    if model is None:
        return
    flat = {**options, **(options.get("env_options") or {})} if isinstance(options.get("env_options"), dict) \
        else dict(options)
    unknown = sorted(set(flat) - set(model.model_fields))
    if unknown:
        known = sorted(set(model.model_fields) - set(BenchmarkOptions.model_fields))
        raise BenchmarkError(f"env_options: unknown key(s) {unknown} for the {bench.name} benchmark; it takes "
                             f"{known} (and {sorted(BenchmarkOptions.model_fields)})")
    try:  # a benchmark may also type its fields
        model.model_validate(flat)
    except ValidationError as e:
        from ..config import format_validation

        raise BenchmarkError(f"env_options: {format_validation(e, root=bench.name)}") from None


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
