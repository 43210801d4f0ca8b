"""Importing parts of the optional `swebench` package, with one clear error when it is missing."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install --no-deps 'swebench>=5.0.2,<6' unidiff"


class GradingUnavailable(RuntimeError):
    """The swebench package (or the part of it grading needs) is not installed."""


def swebench_module(name: str) -> Any:
    """Import a swebench.harness submodule without running swebench.harness/__init__.py, which eagerly
    imports the Docker and Modal runners (and their dependencies) that pure grading does not need."""
    try:
        return importlib.import_module(f"swebench.harness.{name}")
    except ImportError:
        pass
    spec = importlib.util.find_spec("swebench")
    if spec is None or not spec.submodule_search_locations:
        raise GradingUnavailable(f"the swebench package is not installed: {INSTALL_HINT}")
    if "swebench.harness" not in sys.modules:  # a failed package import leaves nothing behind
        harness = types.ModuleType("swebench.harness")
        harness.__path__ = [str(Path(list(spec.submodule_search_locations)[0]) / "harness")]
        sys.modules["swebench.harness"] = harness
    try:
        return importlib.import_module(f"swebench.harness.{name}")
    except ImportError as e:
        raise GradingUnavailable(f"swebench grading cannot be imported ({e}); {INSTALL_HINT}") from None
