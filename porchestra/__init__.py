"""porchestra: Proactive Agentic Orchestration — the library surface (docs/api.md).

    import porchestra as po
    result = po.run("Buy an apple", env=MyEnv(), orchestrator=po.ScriptedModel([...]),
                    worker=po.ScriptedModel([...]))

Names resolve lazily (PEP 562), so `import porchestra` stays cheap and has no side effects: the
model backends, the loop and pydantic schemas load on first use of a name that needs them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name → "module:attribute" it lives in
_EXPORTS: dict[str, str] = {
    "run": "porchestra.api:run",
    "evaluate": "porchestra.api:evaluate",
    "RunResult": "porchestra.run:TaskResult",
    "TaskResult": "porchestra.run:TaskResult",
    "EvalResult": "porchestra.api:EvalResult",
    "Task": "porchestra.envs.base:Task",
    "Score": "porchestra.envs.base:Score",
    "Environment": "porchestra.envs.base:Environment",
    "Benchmark": "porchestra.envs.benchmark:Benchmark",
    "tool": "porchestra.tools.base:tool",
    "Tool": "porchestra.tools.base:Tool",
    "ToolError": "porchestra.tools.base:ToolError",
    "ToolResult": "porchestra.tools.base:ToolResult",
    "ControlPolicy": "porchestra.policies.base:ControlPolicy",
    "Model": "porchestra.models.base:Model",
    "Completion": "porchestra.models.base:Completion",
    "ScriptedModel": "porchestra.models.scripted:ScriptedModel",
    "get_model": "porchestra.models.registry:get_model",
    "RunConfig": "porchestra.config:RunConfig",
    "read_events": "porchestra.log.schema:read_events",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'porchestra' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Package(types.ModuleType):
    """`porchestra.run` is both the public function and a submodule (porchestra/run.py, the task
    lifecycle). Importing a submodule sets it as an attribute of its package; this keeps the public
    name the function. The module stays reachable as usual: `from porchestra.run import run_task`."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # for type checkers and IDEs only; never executed
    from .api import EvalResult, evaluate, run
    from .config import RunConfig
    from .envs.base import Environment, Score, Task
    from .envs.benchmark import Benchmark
    from .log.schema import read_events
    from .models.base import Completion, Model
    from .models.registry import get_model
    from .models.scripted import ScriptedModel
    from .policies.base import ControlPolicy
    from .run import TaskResult
    from .run import TaskResult as RunResult
    from .tools.base import Tool, ToolError, ToolResult, tool
